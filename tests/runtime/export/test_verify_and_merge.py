"""`verify-dataset` names every file that differs from the log; merged runs share one index;
`DatasetUpdated` records each published version."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from runtime.cli import main
from runtime.export import DatasetSpec, export_runs, verify_dataset
from tests.runtime.export.conftest import CollectedRun, data_table


def test_export_records_dataset_updated_once_per_version(
    collected: CollectedRun, tmp_path: Path
) -> None:
    store = collected.store()
    out = tmp_path / "d"
    version = export_runs(store, [collected.run_id], DatasetSpec("lerobot", out))
    again = export_runs(store, [collected.run_id], DatasetSpec("lerobot", out))
    assert version.written and not again.written and again.digest == version.digest
    updates = [e for e in store.read(collected.run_id)
               if e.type == "DatasetUpdated" and e.payload["path"] == str(out)]
    assert len(updates) == 1
    payload = updates[0].payload
    assert payload["format"] == "lerobot"
    assert payload["digest"] == version.digest
    assert payload["files"]["meta/info.json"] == version.files["meta/info.json"]
    assert payload["total_episodes"] == len(payload["episodes"]) == version.total_episodes
    assert payload["log_position"] < updates[0].seq
    assert os.readlink(out).startswith(".d.assetcast/")


def test_verify_dataset_names_each_changed_missing_or_extra_file(
    collected: CollectedRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = collected.store()
    out = tmp_path / "d"
    export_runs(store, [collected.run_id], DatasetSpec("lerobot", out))
    assert verify_dataset(store, out).ok
    stats = out / "meta" / "stats.json"
    stats.write_text(stats.read_text().replace("1", "2", 1))
    (out / "data" / "chunk-000" / "file-000.parquet").unlink()
    (out / "meta" / "extra.txt").write_text("x")
    check = verify_dataset(store, out)
    assert check.problems == [
        "data/chunk-000/file-000.parquet: missing (the version the log recorded has it)",
        "meta/extra.txt: not part of the version the log recorded",
        "meta/stats.json: differs from the version the log recorded",
    ]
    code = main(["--db", collected.db_url, "verify-dataset", str(out)])
    assert code == 1
    printed = capsys.readouterr().out
    assert "problem: meta/stats.json: differs from the version the log recorded" in printed


def test_verify_robomimic_file(collected: CollectedRun, tmp_path: Path) -> None:
    store = collected.store()
    out = tmp_path / "d.hdf5"
    export_runs(store, [collected.run_id], DatasetSpec("robomimic", out))
    assert verify_dataset(store, out).ok
    import h5py

    with h5py.File(out, "r+") as handle:
        handle["data/demo_0/actions"][0, 0] += 1.0
    assert verify_dataset(store, out).problems == [
        "d.hdf5: differs from the version the log recorded"
    ]


def test_merging_two_runs_gives_one_consistent_episode_index(
    collected: CollectedRun, tmp_path: Path
) -> None:
    from runtime.collection import collect
    from runtime.collection.demo_run import prepare_demo_run

    store = collected.store()
    second = prepare_demo_run(store, tmp_path / "second", collected.catalog, batches=1,
                              episodes_per_batch=1, settle_steps=10, seed=11)
    collect(second, store=store, progress=False)
    out = tmp_path / "merged"
    version = export_runs(store, [collected.run_id, second], DatasetSpec("lerobot", out))
    episodes = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [e["episode_index"] for e in episodes] == list(range(version.total_episodes))
    runs = [e["assetcast/run_id"] for e in episodes]
    assert runs == sorted(runs, key=[collected.run_id, second].index)
    assert runs[-1] == second
    frames = data_table(out).to_pydict()
    assert frames["index"] == list(range(version.total_frames))
    assert episodes[-1]["dataset_to_index"] == version.total_frames
    manifest = json.loads((out / "meta" / "assetcast.json").read_text())
    assert manifest["runs"] == [collected.run_id, second]
    for run_id in (collected.run_id, second):
        recorded = [e.payload for e in store.read(run_id) if e.type == "DatasetUpdated"
                    and e.payload["path"] == str(out)]
        assert recorded[-1]["digest"] == version.digest
        assert {(p["batch_index"], p["episode_index"]) for p in recorded[-1]["episodes"]} == {
            (e["assetcast/batch_index"], e["assetcast/episode_index"])
            for e in episodes if e["assetcast/run_id"] == run_id
        }
    assert verify_dataset(store, out).ok


def test_verify_run_with_dataset_checks_the_projection(
    collected: CollectedRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from store.records import NewEvent

    store = collected.store()
    out = tmp_path / "d"
    export_runs(store, [collected.run_id], DatasetSpec("lerobot", out))
    capsys.readouterr()
    assert main(["--db", collected.db_url, "verify", collected.run_id, "--dataset", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"run {collected.run_id}: ok" in printed
    assert f"lerobot dataset {out}: ok" in printed

    # A version the log recorded before the run's last episodes were committed is stale.
    from runtime.export.dataset import build_version
    from runtime.export.episodes import dataset_source, run_source

    events = store.read(collected.run_id)
    first_batch = next(i for i, e in enumerate(events) if e.type == "BatchFinished")
    stale_out = tmp_path / "stale"
    stale = build_version(DatasetSpec("lerobot", stale_out), dataset_source(
        [run_source(collected.run_id, events[: first_batch + 1])]))
    store.append(collected.run_id, [NewEvent(
        "DatasetUpdated", stale.event_payload(collected.run_id, events[first_batch].seq))],
        expected_version=events[-1].seq)
    assert verify_dataset(store, stale_out).ok  # a consistent projection of an earlier log
    code = main(["--db", collected.db_url, "verify", collected.run_id, "--dataset", str(stale_out)])
    assert code == 1
    printed = capsys.readouterr().out
    later = sum(e.type == "TrajectoryCommitted" for e in events[first_batch:])
    assert later > 0
    assert (f"problem: run {collected.run_id}: {later} committed episode(s) are not in the "
            "dataset") in printed

    # A tampered file is named; a path that is no dataset is bad input (exit 2).
    (out / "meta" / "info.json").write_text("{}")
    assert main(["--db", collected.db_url, "verify", collected.run_id, "--dataset", str(out)]) == 1
    assert "problem: meta/info.json: differs from the version the log recorded" in (
        capsys.readouterr().out)
    missing = tmp_path / "nothing"
    code = main(["--db", collected.db_url, "verify", collected.run_id, "--dataset", str(missing)])
    assert code == 2
    assert f"assetcast: error: {missing} does not exist" in capsys.readouterr().err
