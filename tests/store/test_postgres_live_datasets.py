"""Live datasets on PostgreSQL: the builder process opens its own connection from the real URL
(password and schema options included, sent over its pipe) and publishes what `export` writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.export.dataset import DatasetSpec, build_version
from runtime.export.episodes import dataset_source, run_source
from runtime.export.live import LiveDatasets
from store import EventStore


def test_a_collection_on_postgresql_keeps_live_datasets_built_by_a_child_process(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.collection import collect
    from runtime.collection.demo_run import prepare_demo_run, write_catalog

    monkeypatch.setenv("ASSETCAST_LIVE_BUILDER", "process")
    kinds: list[str] = []
    original = LiveDatasets.close

    def noting_close(self: LiveDatasets) -> None:
        kinds.append(self.builder_kind)
        original(self)

    store = EventStore(pg_url)
    run_id = prepare_demo_run(store, tmp_path / "out", write_catalog(tmp_path / "catalog"),
                              batches=2, episodes_per_batch=2, settle_steps=10, cameras=False)
    lerobot, hdf5 = tmp_path / "live", tmp_path / "live.hdf5"
    LiveDatasets.close = noting_close  # type: ignore[method-assign]
    try:
        collect(run_id, store=store, progress=False,
                datasets=[DatasetSpec("lerobot", lerobot), DatasetSpec("robomimic", hdf5)])
    finally:
        LiveDatasets.close = original  # type: ignore[method-assign]
    assert kinds == ["process"]
    events = store.read(run_id)
    updates = [e.payload for e in events if e.type == "DatasetUpdated"]
    source = dataset_source([run_source(run_id, events)])
    exported = build_version(DatasetSpec("lerobot", tmp_path / "exported"), source)
    build_version(DatasetSpec("robomimic", tmp_path / "exported.hdf5"), source)
    last_lerobot = [u for u in updates if u["format"] == "lerobot"][-1]
    assert last_lerobot["digest"] == exported.digest
    assert hdf5.read_bytes() == (tmp_path / "exported.hdf5").read_bytes()
    assert _files(lerobot) == _files(tmp_path / "exported")


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
