"""One collected demo run (2 batches x 2 episodes) in a SQLite store, shared by every
export test: collecting is the slow part, exporting it is cheap."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.collection.demo_run import prepare_demo_run, write_catalog


@dataclass(frozen=True)
class CollectedRun:
    db_url: str
    run_id: str
    output_dir: Path
    catalog: Path
    root: Path

    def store(self):  # type: ignore[no-untyped-def]
        from store import EventStore

        return EventStore(self.db_url)


@pytest.fixture(scope="session")
def collected(tmp_path_factory: pytest.TempPathFactory) -> CollectedRun:
    from runtime.collection import collect
    from store import EventStore

    root = tmp_path_factory.mktemp("export-run")
    db_url = f"sqlite:///{root / 'assetcast.db'}"
    catalog = write_catalog(root / "catalog")
    store = EventStore(db_url)
    run_id = prepare_demo_run(
        store, root / "out", catalog, batches=2, episodes_per_batch=2, settle_steps=10
    )
    result = collect(run_id, store=store, progress=False)
    assert result.accepted >= 3
    store.close()
    return CollectedRun(db_url, run_id, root / "out", catalog, root)


def trajectories(run: CollectedRun) -> list[dict]:
    """The committed trajectories of the run, in (batch, episode) order, as numpy arrays."""
    import json

    import torch

    store = run.store()
    receipts = sorted(
        ((e.payload["batch_index"], e.payload["episode_index"]), e.payload["path"])
        for e in store.read(run.run_id)
        if e.type == "TrajectoryCommitted"
    )
    loaded = []
    for _key, path in receipts:
        payload = torch.load(run.output_dir / path, weights_only=True)
        meta = json.loads(payload.pop("metadata"))
        loaded.append({**{k: v.numpy() for k, v in payload.items()}, "metadata": meta})
    return loaded


def camera_stride(run: CollectedRun) -> int:
    """Control steps between two dataset frames: the cameras' stride (1 without cameras)."""
    import json as _json

    for event in run.store().read(run.run_id):
        if event.type == "TrajectoryCommitted":
            meta = next((f for f in event.payload.get("files") or ()
                         if f["modality"] == "metadata"), None)
            if meta is None:
                return 1
            cameras = _json.loads((run.output_dir / meta["path"]).read_text())["cameras"]
            return int(next(iter(cameras.values()))["stride"])
    return 1


def data_table(root: Path):  # type: ignore[no-untyped-def]
    """Every frame of a LeRobot export: its data files (one per batch) in index order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted((root / "data").rglob("*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files])
