"""A Franka Panda run exports its joint-space data under the names and units the robot
records: ``observation.state`` (7 joints + gripper width), velocities, the end-effector pose
and both action representations, beside the raw actuator commands."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pyarrow.parquet as pq
import pytest

from runtime.export.dataset import manifest_of, render
from runtime.export.episodes import dataset_source, run_source
from tests.runtime.export.conftest import CollectedRun, camera_stride, trajectories


@pytest.fixture(scope="module")
def arm_run(tmp_path_factory: pytest.TempPathFactory) -> CollectedRun:
    from runtime.collection import collect
    from runtime.collection.demo_run import prepare_demo_run, write_catalog
    from store import EventStore

    root = tmp_path_factory.mktemp("arm-run")
    db_url = f"sqlite:///{root / 'assetcast.db'}"
    catalog = write_catalog(root / "catalog")
    store = EventStore(db_url)
    run_id = prepare_demo_run(store, root / "out", catalog, batches=1, episodes_per_batch=2,
                              settle_steps=10, arm=True)
    assert collect(run_id, store=store, progress=False).accepted >= 1
    return CollectedRun(db_url, run_id, root / "out", catalog, root)


def _render(run: CollectedRun, fmt: str, root: Path, name: str = "") -> None:
    source = dataset_source([run_source(run.run_id, run.store().read(run.run_id))])
    render(fmt, source, manifest_of(source, fmt), root, file_name=name)


def test_lerobot_features_carry_the_arm_columns(arm_run: CollectedRun, tmp_path: Path) -> None:
    _render(arm_run, "lerobot", tmp_path)
    info = json.loads((tmp_path / "meta" / "info.json").read_text())
    traj = trajectories(arm_run)
    columns = traj[0]["metadata"]["columns"]
    features = info["features"]
    assert info["robot_type"] == "franka_panda"
    for key, lerobot in (
        ("observation.state", "observation.state"),
        ("observation.velocity", "observation.velocity"),
        ("observation.ee_pose", "observation.ee_pose"),
        ("action.joint_position", "action.joint_position"),
        ("action.ee_delta", "action.ee_delta"),
        ("actions", "action"),
        ("robot_qpos", "observation.robot_qpos"),
    ):
        assert features[lerobot]["names"] == columns[key]["names"], key
        assert features[lerobot]["units"] == columns[key]["units"], key
    assert features["observation.state"]["shape"] == [8]
    assert features["observation.state"]["names"][-1] != "panda_joint7"  # + gripper width
    table = pq.read_table(tmp_path / "data" / "chunk-000" / "file-000.parquet").to_pydict()
    picked = np.arange(0, traj[0]["actions"].shape[0], camera_stride(arm_run))
    steps = len(picked)
    np.testing.assert_array_equal(
        np.array(table["observation.state"][:steps], dtype=np.float32),
        traj[0]["observation.state"][picked].astype(np.float32),
    )
    np.testing.assert_array_equal(
        np.array(table["action.joint_position"][:steps], dtype=np.float32),
        traj[0]["action.joint_position"][picked].astype(np.float32),
    )


def test_robomimic_keys_for_the_arm(arm_run: CollectedRun, tmp_path: Path) -> None:
    _render(arm_run, "robomimic", tmp_path, "arm.hdf5")
    traj = trajectories(arm_run)[0]
    stride = camera_stride(arm_run)
    picked = np.arange(0, traj["actions"].shape[0], stride)
    after = np.minimum(picked + stride, traj["actions"].shape[0])
    with h5py.File(tmp_path / "arm.hdf5", "r") as handle:
        demo = handle["data/demo_0"]
        np.testing.assert_array_equal(demo["obs/state"][()], traj["observation.state"][picked])
        np.testing.assert_array_equal(demo["next_obs/ee_pose"][()],
                                      traj["observation.ee_pose"][after])
        np.testing.assert_array_equal(demo["actions"][()], traj["actions"][picked])
        np.testing.assert_array_equal(demo["actions_joint_position"][()],
                                      traj["action.joint_position"][picked])
        np.testing.assert_array_equal(demo["actions_ee_delta"][()],
                                      traj["action.ee_delta"][picked])
        env = json.loads(handle["data"].attrs["env_args"])
        assert env["env_kwargs"]["units"]["state"] == traj["metadata"]["columns"][
            "observation.state"]["units"]
