"""Camera files in datasets: LeRobot video features (the committed H.264 files, byte for
byte) and robomimic image observations, frame-aligned with the trajectory. Skipped while the
demo task records no camera (state-only runs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from runtime.export.dataset import manifest_of, render
from runtime.export.episodes import dataset_source, run_source
from tests.runtime.export.conftest import CollectedRun, trajectories


@pytest.fixture(scope="module")
def camera_run(collected: CollectedRun) -> tuple[CollectedRun, list[dict]]:
    events = collected.store().read(collected.run_id)
    receipts = [e.payload for e in events if e.type == "TrajectoryCommitted"]
    if not any(r.get("files") for r in receipts):
        pytest.skip("the demo task records no camera")
    return collected, sorted(receipts, key=lambda r: (r["batch_index"], r["episode_index"]))


def _render(run: CollectedRun, fmt: str, root: Path, name: str = "") -> dict[str, str]:
    source = dataset_source([run_source(run.run_id, run.store().read(run.run_id))])
    files, _totals = render(fmt, source, manifest_of(source, fmt), root, file_name=name)
    return files


def test_lerobot_videos_are_the_committed_files(camera_run: tuple, tmp_path: Path) -> None:
    from runtime.sim.cameras.reader import read_episode_frames

    run, receipts = camera_run
    files = _render(run, "lerobot", tmp_path)
    info = json.loads((tmp_path / "meta" / "info.json").read_text())
    rgb = [f for f in receipts[0]["files"] if f["modality"] == "rgb"]
    assert info["video_path"] == (
        "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    )
    episodes = pq.read_table(tmp_path / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    for entry in rgb:
        key = f"observation.images.{entry['camera']}"
        feature = info["features"][key]
        assert feature["dtype"] == "video" and feature["shape"][2] == 3
        assert feature["info"]["video.codec"] == "h264"
        assert feature["info"]["video.fps"] == info["fps"]
        for number, receipt in enumerate(receipts):
            committed = next(f for f in receipt["files"]
                             if f["camera"] == entry["camera"] and f["modality"] == "rgb")
            rel = f"videos/{key}/chunk-000/file-{number:03d}.mp4"
            assert files[rel] == committed["sha256"]
            row = episodes[number]
            assert row[f"videos/{key}/file_index"] == number
            assert row[f"videos/{key}/from_timestamp"] == 0.0
            assert row[f"videos/{key}/to_timestamp"] == pytest.approx(row["length"] / info["fps"])
            frames = read_episode_frames(run.output_dir, receipt).cameras[entry["camera"]]
            assert len(frames.frames["rgb"]) >= row["length"]
        stats = json.loads((tmp_path / "meta" / "stats.json").read_text())[key]
        assert np.asarray(stats["mean"]).shape == (3, 1, 1)
        assert 0.0 <= np.asarray(stats["min"]).min() <= np.asarray(stats["max"]).max() <= 1.0


def test_robomimic_images_are_frame_aligned(camera_run: tuple, tmp_path: Path) -> None:
    import h5py

    from runtime.sim.cameras.reader import read_episode_frames

    run, receipts = camera_run
    _render(run, "robomimic", tmp_path, "d.hdf5")
    with h5py.File(tmp_path / "d.hdf5", "r") as handle:
        for number, receipt in enumerate(receipts):
            demo = handle[f"data/demo_{number}"]
            frames = read_episode_frames(run.output_dir, receipt)
            steps = demo.attrs["num_samples"]
            for name, camera in frames.cameras.items():
                image = demo[f"obs/{name}_image"][()]
                assert image.dtype == np.uint8
                assert image.shape[1:] == camera.frames["rgb"].shape[1:]
                np.testing.assert_array_equal(image, camera.frames["rgb"][:steps])
                np.testing.assert_array_equal(
                    demo[f"next_obs/{name}_image"][()][:-1], camera.frames["rgb"][1:steps]
                )
                if "depth" in camera.frames:
                    depth = demo[f"obs/{name}_depth"][()]
                    assert depth.dtype == np.uint16 and depth.shape[-1] == 1
            stride = frames.cameras[next(iter(frames.cameras))].metadata["stride"]
            traj = trajectories(run)[number]
            np.testing.assert_array_equal(demo["actions"][()], traj["actions"][::stride])
            np.testing.assert_array_equal(
                demo["obs/robot_qpos"][()], traj["robot_qpos"][: traj["actions"].shape[0]][::stride]
            )
