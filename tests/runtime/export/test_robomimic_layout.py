"""The robomimic HDF5 layout of an export: attrs, datasets, next_obs, masks, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from runtime.export import DatasetSpec, export_runs
from runtime.export.robomimic import is_valid_split
from tests.runtime.export.conftest import CollectedRun, camera_stride, trajectories


@pytest.fixture(scope="module")
def exported(collected: CollectedRun, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("robomimic") / "demo.hdf5"
    export_runs(collected.store(), [collected.run_id], DatasetSpec("robomimic", out))
    return out


def test_demos_hold_states_actions_rewards_dones_obs_and_next_obs(
    exported: Path, collected: CollectedRun
) -> None:
    episodes = trajectories(collected)
    stride = camera_stride(collected)
    with h5py.File(exported, "r") as handle:
        data = handle["data"]
        assert sorted(data) == [f"demo_{i}" for i in range(len(episodes))]
        picks = [np.arange(0, t["actions"].shape[0], stride) for t in episodes]
        assert data.attrs["total"] == sum(len(p) for p in picks)
        env_args = json.loads(data.attrs["env_args"])
        assert env_args["env_name"] == "place_item_in_bin"
        assert env_args["env_kwargs"]["control_fps"] == 50 // stride
        for i, (traj, picked) in enumerate(zip(episodes, picks, strict=True)):
            demo = data[f"demo_{i}"]
            steps = len(picked)
            after = np.minimum(picked + stride, traj["actions"].shape[0])
            assert demo.attrs["num_samples"] == steps
            assert demo.attrs["model_file"].startswith('<mujoco model="assetcast_task">')
            np.testing.assert_array_equal(demo["actions"][()], traj["actions"][picked])
            np.testing.assert_array_equal(demo["obs/robot_qpos"][()], traj["robot_qpos"][picked])
            np.testing.assert_array_equal(
                demo["next_obs/robot_qpos"][()], traj["robot_qpos"][after]
            )
            pose = traj["entity_pose"].reshape(traj["entity_pose"].shape[0], -1)
            np.testing.assert_array_equal(demo["obs/entity_pose"][()], pose[picked])
            assert demo["obs/finger_width"].shape == (steps, 1)
            # MuJoCo's state (time, qpos, qvel, warm start, ctrl), never an observation
            np.testing.assert_array_equal(demo["states"][()], traj["physics_state"][picked])
            assert "physics_state" not in demo["obs"]
            assert demo["rewards"][()].tolist() == [0.0] * (steps - 1) + [1.0]
            assert demo["dones"][()].tolist() == [0] * (steps - 1) + [1]
            assert demo.attrs["run_id"] == collected.run_id
            assert demo.attrs["trajectory_sha256"] == traj_sha(collected, i)


def traj_sha(run: CollectedRun, number: int) -> str:
    commits = sorted(
        ((e.payload["batch_index"], e.payload["episode_index"]), e.payload["sha256"])
        for e in run.store().read(run.run_id)
        if e.type == "TrajectoryCommitted"
    )
    return commits[number][1]


def test_masks_are_the_seeded_split_and_cover_every_demo(
    exported: Path, collected: CollectedRun
) -> None:
    with h5py.File(exported, "r") as handle:
        train = [n.decode() for n in handle["mask/train"][()]]
        valid = [n.decode() for n in handle["mask/valid"][()]]
        names = sorted(handle["data"])
    assert sorted(train + valid) == names
    for name in names:
        sha = traj_sha(collected, int(name.split("_")[1]))
        assert (name in valid) == is_valid_split(sha, 0)


def test_same_log_gives_the_same_bytes(
    exported: Path, collected: CollectedRun, tmp_path: Path
) -> None:
    again = tmp_path / "again.hdf5"
    export_runs(collected.store(), [collected.run_id], DatasetSpec("robomimic", again))
    assert again.read_bytes() == exported.read_bytes()
