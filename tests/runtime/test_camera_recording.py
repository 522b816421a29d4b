"""Camera files of committed episodes: what they show, how they are listed, verified, resumed.

One demo run (its task has a front and a wrist camera) is collected once per module; tests
that damage files work on a copy of its output folder.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from domain.task import parse_task, task_to_dict
from runtime.cli import main
from runtime.collection import collect
from runtime.collection.recordings import CommittedTrajectoryMissing
from runtime.resume import resume
from runtime.sim import TaskEnvironment, TrajectoryRecorder
from runtime.sim.cameras import CameraRig, FrameRecorder
from runtime.sim.cameras.reader import CameraFileInvalid, read_episode_frames
from runtime.sim.scene import entity_body_name
from runtime.taskfile import load_task
from runtime.verify import verify_events
from store import EventStore
from tests.runtime.demo_runs import prepared


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, catalog: Path) -> tuple[str, Path, Path]:
    base = tmp_path_factory.mktemp("cameras")
    url = f"sqlite:///{base / 'a.db'}"
    with EventStore(url) as store:
        run_id = prepared(store, base / "out", catalog, batches=1, episodes_per_batch=2)
        collect(run_id, store=store, progress=False)
    return run_id, base / "out", base / "a.db"


def events_of(db: Path, run_id: str) -> list[Any]:
    with EventStore(f"sqlite:///{db}") as store:
        return store.read(run_id)


def commits(db: Path, run_id: str) -> list[dict[str, Any]]:
    return [e.payload for e in events_of(db, run_id) if e.type == "TrajectoryCommitted"]


@pytest.fixture()
def damaged(run: tuple[str, Path, Path], tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """The run's output folder, restored after the test."""
    run_id, out, db = run
    backup = tmp_path / "backup"
    shutil.copytree(out, backup)
    shutil.copy(db, tmp_path / "a.db")
    yield run_id, out, db
    shutil.rmtree(out)
    shutil.copytree(backup, out)
    shutil.copy(tmp_path / "a.db", db)


def label(frames: Any, name: str) -> int:
    return next(i for i, n in frames.labels.items() if n == name)


def test_every_camera_file_is_listed_with_its_digest(run: tuple[str, Path, Path]) -> None:
    run_id, out, db = run
    receipts = commits(db, run_id)
    assert receipts, "the demo run must accept an episode"
    for receipt in receipts:
        stem = f"b{receipt['batch_index']:04d}_e{receipt['episode_index']:04d}"
        listed = [(f["camera"], f["modality"]) for f in receipt["files"]]
        assert listed == [
            ("front", "rgb"), ("front", "depth"), ("front", "segmentation"),
            ("wrist", "rgb"), ("wrist", "depth"), ("wrist", "segmentation"), (None, "metadata"),
        ]
        names = [Path(f["path"]).name for f in receipt["files"]]
        assert names[0] == f"{stem}.front.rgb.mp4" and names[-1] == f"{stem}.cameras.json"
        for entry in receipt["files"]:
            data = (out / entry["path"]).read_bytes()
            assert len(data) == entry["bytes"]
            assert Path(entry["path"]).parent == Path(receipt["path"]).parent


def test_frames_follow_the_trajectory_clock(run: tuple[str, Path, Path]) -> None:
    import torch

    run_id, out, db = run
    receipt = commits(db, run_id)[0]
    frames = read_episode_frames(out, receipt)
    trajectory = torch.load(out / receipt["path"], weights_only=True)
    samples = len(trajectory["timestamps"])
    front = frames.cameras["front"]
    stride = front.metadata["stride"]
    assert stride == 5  # 50 Hz control, 10 fps
    assert len(front.timestamps_s) == (samples - 1) // stride + 1
    assert front.timestamps_s[7] == 7 / 10 and front.sample_index[7] == 35
    for modality in ("rgb", "depth", "segmentation"):
        assert len(front.frames[modality]) == len(front.timestamps_s)
    assert front.frames["rgb"].shape[1:] == (128, 128, 3)
    assert front.frames["depth"].dtype == np.uint16
    # The mounted camera moved with the hand; the fixed one did not.
    wrist_path = np.asarray(frames.cameras["wrist"].metadata["position_m"])
    front_path = np.asarray(front.metadata["position_m"])
    assert np.ptp(wrist_path, axis=0).max() > 0.05 and np.ptp(front_path, axis=0).max() == 0


def test_the_item_is_seen_at_the_start_and_in_the_bin_at_the_end(
    run: tuple[str, Path, Path],
) -> None:
    run_id, out, db = run
    frames = read_episode_frames(out, commits(db, run_id)[0])
    segmentation = frames.cameras["front"].frames["segmentation"]
    item, bin_ = label(frames, "entity:item"), label(frames, "entity:bin")
    assert (segmentation[0] == item).sum() > 0
    last = segmentation[-1]
    assert (last == item).sum() > 0
    rows, cols = np.nonzero(last == bin_)
    item_rows, item_cols = np.nonzero(last == item)
    assert rows.min() <= item_rows.mean() <= rows.max()
    assert cols.min() <= item_cols.mean() <= cols.max()
    # At the start the item is in front of the bin (nearer the camera, lower in the image).
    start_item_rows, _ = np.nonzero(segmentation[0] == item)
    assert start_item_rows.mean() > np.nonzero(segmentation[0] == bin_)[0].mean()


def test_depth_lies_within_the_table_to_camera_distance(run: tuple[str, Path, Path]) -> None:
    run_id, out, db = run
    frames = read_episode_frames(out, commits(db, run_id)[0])
    front = frames.cameras["front"]
    depth = front.frames["depth"][0].astype(float) / 1000.0
    table = front.frames["segmentation"][0] == label(frames, "table")
    position = np.asarray(front.metadata["position_m"][0])
    w, x, y, z = front.metadata["quat_wxyz"][0]
    forward = -np.array([2 * (x * z + y * w), 2 * (y * z - x * w), 1 - 2 * (x * x + y * y)])
    corners = np.array([[sx * 0.4, sy * 0.4, sz] for sx in (-1, 1) for sy in (-1, 1)
                        for sz in (0.0, -0.04)])
    along = (corners - position) @ forward  # z-depth is linear: extremes at the corners
    assert table.sum() > 1000
    assert along.min() - 0.003 <= depth[table].min() and depth[table].max() <= along.max() + 0.003
    assert depth[depth > 0].max() <= along.max() + 0.003  # nothing seen beyond the table


def test_verify_catches_a_flipped_byte_in_a_video(damaged: tuple[str, Path, Path]) -> None:
    run_id, out, db = damaged
    receipt = commits(db, run_id)[0]
    video = out / receipt["files"][3]["path"]  # the wrist rgb video
    data = bytearray(video.read_bytes())
    data[len(data) // 2] ^= 0x01
    video.write_bytes(bytes(data))
    result = verify_events(run_id, events_of(db, run_id))
    assert len(result.problems) == 1
    assert result.problems[0].startswith(
        f"batch 0 episode {receipt['episode_index']}: camera file (wrist rgb) {video} sha256 "
    )
    with pytest.raises(CameraFileInvalid, match="differs from its commit receipt"):
        read_episode_frames(out, receipt)


class _FailsOnReplace(TaskEnvironment):
    def replace_assets(self, deployment_dir: Any) -> Any:
        raise RuntimeError("replacement refused by the test")


def _fails_on_replace(deployment_dir: Path, *, seed: int, settle_steps: int) -> TaskEnvironment:
    return _FailsOnReplace.from_deployment(deployment_dir, settle_steps=settle_steps)


def test_resume_refuses_a_missing_video_like_a_missing_trajectory(
    tmp_path: Path, catalog: Path
) -> None:
    with EventStore(f"sqlite:///{tmp_path / 'a.db'}") as store:
        run_id = prepared(store, tmp_path / "out", catalog, batches=2, episodes_per_batch=1)
        with pytest.raises(RuntimeError, match="replacement refused"):
            collect(
                run_id,
                store=store,
                progress=False,
                environment_factory=_fails_on_replace,
            )
        [receipt] = [e.payload for e in store.read(run_id) if e.type == "TrajectoryCommitted"]
        video = tmp_path / "out" / receipt["files"][0]["path"]
        video.unlink()
        before = len(store.read(run_id))
        with pytest.raises(CommittedTrajectoryMissing) as caught:
            resume(run_id, store=store, progress=False)
        assert len(store.read(run_id)) == before  # refused before appending anything
    assert str(caught.value) == (
        f"run {run_id}: committed camera file (front rgb) {video} (batch 0, episode 0) "
        "is missing; the dataset is damaged"
    )


def test_cameras_do_not_change_the_physics(run: tuple[str, Path, Path]) -> None:
    """The same episode with and without cameras (and their visual meshes) steps identically."""
    _run_id, out, _db = run
    deployment = out / "batch_0000"
    with_cameras = load_task(deployment / "task.yaml")
    without = parse_task({**task_to_dict(with_cameras), "cameras": []}, source="t.yaml")
    results = []
    for task in (with_cameras, without):
        env = TaskEnvironment(task, deployment, settle_steps=10)
        rig = CameraRig(task.cameras) if task.cameras else None
        try:
            env.reset(12345)
            recorder: Any = TrajectoryRecorder.for_environment(env)
            if rig is not None:
                recorder = FrameRecorder(recorder, rig, env)
            env.run_program(recorder)
            payload = recorder.to_payload({})
        finally:
            if rig is not None:
                rig.close()
            env.close()
        results.append(payload)
    for key in ("robot_qpos", "entity_pose", "actions", "timestamps"):
        assert results[0][key].numpy().tobytes() == results[1][key].numpy().tobytes(), key
    assert entity_body_name("item") == "entity_item"


def test_videos_encoded_while_rendering_equal_encoding_all_frames_at_the_end(
    run: tuple[str, Path, Path],
) -> None:
    """RGB frames go to their H.264 encoder on the render thread as they are drawn; the
    bytes must be exactly those of encoding the episode's frames in one go."""
    from runtime.sim.cameras.encoding import encode_rgb_mp4

    _run_id, out, _db = run
    deployment = out / "batch_0000"
    task = load_task(deployment / "task.yaml")
    env = TaskEnvironment(task, deployment, settle_steps=10)
    rig = CameraRig(task.cameras)
    try:
        env.reset(12345)
        recorder = FrameRecorder(TrajectoryRecorder.for_environment(env), rig, env)
        env.run_program(recorder)
        recordings = recorder.recordings
    finally:
        rig.close()
        env.close()
    checked = 0
    for recording in recordings.values():
        if "rgb" in recording.camera.modalities:
            assert recording.frame_count > 10
            expected = encode_rgb_mp4(recording.stacked("rgb"), recording.camera.fps)
            assert recording.encoded["rgb"] == expected
            checked += 1
    assert checked == len(task.cameras)


def test_cli_episode_writes_a_contact_sheet_and_the_videos(
    run: tuple[str, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id, _out, db = run
    receipt = commits(db, run_id)[0]
    target = tmp_path / "frames"
    argv = ["--db", f"sqlite:///{db}", "--log-level", "warning", "episode", run_id, "0",
            str(receipt["episode_index"]), "--frames", str(target)]
    assert main(argv) == 0
    stem = f"b0000_e{receipt['episode_index']:04d}"
    sheet = (target / f"{stem}.contact_sheet.png").read_bytes()
    assert sheet.startswith(b"\x89PNG\r\n\x1a\n")
    assert sorted(p.name for p in target.iterdir()) == sorted(
        [f"{stem}.contact_sheet.png", *(Path(f["path"]).name for f in receipt["files"])]
    )
    metadata = json.loads((target / f"{stem}.cameras.json").read_text())
    assert set(metadata["cameras"]) == {"front", "wrist"}
    capsys.readouterr()
    assert main([*argv[:4], "episode", run_id, "0", "99", "--frames", str(target)]) == 2
    assert capsys.readouterr().err == (
        f"assetcast: error: run {run_id}: batch 0 episode 99 has no committed trajectory\n"
    )
