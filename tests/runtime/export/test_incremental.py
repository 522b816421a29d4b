"""A dataset that grows with its log (live updates) writes only what is new, and still ends
byte-identical to a one-shot export of the same log."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.export.dataset import DatasetSpec, build_version
from runtime.export.episodes import dataset_source, run_source
from tests.runtime.export.conftest import CollectedRun


def _source_up_to(run: CollectedRun, stop: str, batch: int = 0):  # type: ignore[no-untyped-def]
    """The run's dataset source as the log stood at its first ``stop`` event of ``batch``."""
    events = run.store().read(run.run_id)
    for number, event in enumerate(events):
        if event.type == stop and event.payload.get("batch_index", batch) == batch:
            return dataset_source([run_source(run.run_id, events[: number + 1])])
    raise AssertionError(f"no {stop} of batch {batch}")


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _inodes(root: Path) -> dict[str, int]:
    return {
        p.relative_to(root).as_posix(): os.stat(p).st_ino for p in root.rglob("*") if p.is_file()
    }


@pytest.mark.parametrize("first_stop", [("BatchFinished", 0), ("TrajectoryCommitted", 1)])
def test_growing_dataset_equals_one_shot_and_keeps_finished_batches(
    collected: CollectedRun, tmp_path: Path, first_stop: tuple[str, int]
) -> None:
    full = _source_up_to(collected, "RunCompleted")
    live = DatasetSpec("lerobot", tmp_path / "live")
    before = build_version(live, _source_up_to(collected, *first_stop))
    assert 0 < before.total_episodes < len(full.episodes)
    old_inodes = _inodes(live.path)
    after = build_version(live, full)
    whole = build_version(DatasetSpec("lerobot", tmp_path / "whole"), full)
    assert after.written and after.digest == whole.digest
    assert _files(live.path) == _files(whole.spec.path)
    new_inodes = _inodes(live.path)
    kept = {name for name, inode in new_inodes.items() if old_inodes.get(name) == inode}
    # The first batch's frames and every video already published are reused, not rewritten;
    # the metadata that lists every episode is written anew.
    first_batch_data = "data/chunk-000/file-000.parquet"
    assert first_batch_data in kept
    old_videos = {n for n in old_inodes if n.startswith("videos/")}
    assert old_videos and old_videos <= kept
    assert "meta/episodes/chunk-000/file-000.parquet" not in kept
    assert "data/chunk-000/file-001.parquet" not in kept


def test_a_file_edited_in_place_is_not_carried_into_the_next_version(
    collected: CollectedRun, tmp_path: Path
) -> None:
    full = _source_up_to(collected, "RunCompleted")
    live = DatasetSpec("lerobot", tmp_path / "live")
    build_version(live, _source_up_to(collected, "BatchFinished", 0))
    data = live.path / "data/chunk-000/file-000.parquet"
    with open(data, "r+b") as handle:  # same inode: a hard link would share the edit
        handle.seek(100)
        handle.write(b"\0\0\0\0")
    after = build_version(live, full)
    whole = build_version(DatasetSpec("lerobot", tmp_path / "whole"), full)
    assert after.digest == whole.digest
    assert _files(live.path) == _files(whole.spec.path)


@pytest.mark.parametrize("first_stop", [("BatchFinished", 0), ("TrajectoryCommitted", 1)])
def test_growing_robomimic_file_equals_one_shot(
    collected: CollectedRun, tmp_path: Path, first_stop: tuple[str, int]
) -> None:
    from runtime.export import robomimic
    from runtime.export.dataset import manifest_of, read_manifest

    full = _source_up_to(collected, "RunCompleted")
    live = DatasetSpec("robomimic", tmp_path / "live.hdf5")
    before = build_version(live, _source_up_to(collected, *first_stop))
    assert 0 < before.total_episodes < len(full.episodes)
    manifest = manifest_of(full, "robomimic")
    # Whole batches are copied and only the new ones written; a file that ends inside a
    # batch is written whole again.
    expected_reuse = before.total_episodes if first_stop[0] == "BatchFinished" else 0
    assert robomimic.reusable_prefix(live.path, manifest) == expected_reuse
    after = build_version(live, full)
    whole = build_version(DatasetSpec("robomimic", tmp_path / "whole.hdf5"), full)
    assert after.written
    assert after.files["live.hdf5"] == whole.files["whole.hdf5"]  # the digest names the file
    assert live.path.read_bytes() == whole.spec.path.read_bytes()
    # The manifest read back from the file alone (no memo of this process) is the one built.
    robomimic._WRITTEN.clear()
    assert read_manifest(live) == manifest
    assert robomimic.reusable_prefix(live.path, manifest) == 0  # not this process's file


def test_a_robomimic_file_changed_since_it_was_published_is_written_whole(
    collected: CollectedRun, tmp_path: Path
) -> None:
    from runtime.export import robomimic
    from runtime.export.dataset import manifest_of

    full = _source_up_to(collected, "RunCompleted")
    live = DatasetSpec("robomimic", tmp_path / "live.hdf5")
    build_version(live, _source_up_to(collected, "BatchFinished", 0))
    with open(live.path, "r+b") as handle:  # an edit in place: same inode, new mtime
        handle.seek(0, os.SEEK_END)
        handle.write(b"\0")
    assert robomimic.reusable_prefix(live.path, manifest_of(full, "robomimic")) == 0
    after = build_version(live, full)
    whole = build_version(DatasetSpec("robomimic", tmp_path / "whole.hdf5"), full)
    assert after.files["live.hdf5"] == whole.files["whole.hdf5"]


@pytest.mark.parametrize("tampered", [False, True])
def test_a_robomimic_file_as_the_log_recorded_it_is_extended_by_a_new_process(
    collected: CollectedRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tampered: bool
) -> None:
    """After a resume (a process that did not write the file), the digest the log recorded
    for the path lets the next version copy the file's batches instead of rewriting them all;
    a file whose bytes differ from that record is written whole."""
    from runtime.export import robomimic

    full = _source_up_to(collected, "RunCompleted")
    live = DatasetSpec("robomimic", tmp_path / "live.hdf5")
    before = build_version(live, _source_up_to(collected, "BatchFinished", 0))
    if tampered:  # one recorded action changed in place: a readable file, other bytes
        import h5py

        with h5py.File(live.path, "r+") as handle:
            handle["data/demo_0/actions"][0, 0] += 1.0
    robomimic._WRITTEN.clear()  # as in a new process
    written: list[int] = []
    real = robomimic._write_demo

    def counted(handle, data_group, i, *args, **kwargs):  # type: ignore[no-untyped-def]
        written.append(i)
        return real(handle, data_group, i, *args, **kwargs)

    monkeypatch.setattr(robomimic, "_write_demo", counted)
    after = build_version(live, full, recorded=before.digest)
    whole = build_version(DatasetSpec("robomimic", tmp_path / "whole.hdf5"), full)
    assert live.path.read_bytes() == whole.spec.path.read_bytes()
    assert after.files["live.hdf5"] == whole.files["whole.hdf5"]
    fresh = list(range(before.total_episodes, len(full.episodes)))
    all_demos = list(range(len(full.episodes)))
    assert written[: len(all_demos if tampered else fresh)] == (all_demos if tampered else fresh)


def test_the_manifest_text_is_json_bytes_however_often_episodes_are_reused() -> None:
    from runtime.export.lerobot import json_bytes, manifest_bytes

    episode = {"run_id": "r", "batch_index": 0, "episode_index": 0, "asset_set_id": "a",
               "assets": {"bin": {"asset_id": "b", "content_sha256": "c"}},
               "trajectory_sha256": "s", "commit_seq": 3, "camera_files": {}}
    manifest = {"schema_version": 1, "format": "lerobot", "instruction": 'Put "it" — é\n in',
                "runs": ["r"], "episodes": [dict(episode, batch_index=i) for i in range(3)]}
    for _ in range(2):  # the second time every episode's text comes from the memo
        assert manifest_bytes(manifest) == json_bytes(manifest)
    odd = dict(manifest, episodes=[dict(episode, camera_files={"wrist.rgb": "x"}, assets={})])
    assert manifest_bytes(odd) == json_bytes(odd)
    assert manifest_bytes(dict(manifest, episodes=[])) == json_bytes(dict(manifest, episodes=[]))
