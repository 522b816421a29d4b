"""A collection asks its live datasets to catch up when its last batch starts, so the build it
ends with (which the collector waits for) holds that batch alone, however long the pacing
interval between builds is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def test_the_last_batch_starts_a_build_of_every_batch_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.collection import collect
    from runtime.collection.demo_run import prepare_demo_run, write_catalog
    from runtime.export import live
    from runtime.export.dataset import DatasetSpec
    from store import EventStore

    init = live.LiveDatasets.__init__

    def paced_for_ten_minutes(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **{**kwargs, "min_interval_s": 600.0})

    monkeypatch.setattr(live.LiveDatasets, "__init__", paced_for_ten_minutes)
    store = EventStore(f"sqlite:///{tmp_path / 'assetcast.db'}")
    run_id = prepare_demo_run(store, tmp_path / "out", write_catalog(tmp_path / "catalog"),
                              batches=3, episodes_per_batch=2, settle_steps=10)
    collect(run_id, store=store, progress=False,
            datasets=[DatasetSpec("lerobot", tmp_path / "dataset")])
    events = store.read(run_id)
    accepted = {(e.payload["batch_index"], e.payload["episode_index"])
                for e in events if e.type == "TrajectoryCommitted"}
    last_opened = max(e.seq for e in events if e.type == "BatchStarted")
    updates = [e for e in events if e.type == "DatasetUpdated"]
    covered = [{(x["batch_index"], x["episode_index"]) for x in e.payload["episodes"]}
               for e in updates]
    # Built beside the last batch: everything committed before it, within the ten minutes.
    before_last = {k for k in accepted if k[0] < 2}
    assert before_last and before_last in covered[:-1]
    assert any(e.payload["log_position"] <= last_opened for e in updates[:-1])
    assert covered[-1] == accepted
    store.close()
