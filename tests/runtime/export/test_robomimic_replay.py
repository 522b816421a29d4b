"""robomimic `states` are MuJoCo's own state: set one into the demo's `model_file`, apply the
demo's action, step, and the next exported state follows bit for bit."""

from __future__ import annotations

import json
from pathlib import Path

import mujoco
import numpy as np
import pytest

from runtime.collection.demo_run import prepare_demo_run
from runtime.export import DatasetSpec, export_runs
from runtime.sim import physics_state
from tests.runtime.export.conftest import CollectedRun


@pytest.fixture(scope="module")
def state_only_run(collected: CollectedRun, tmp_path_factory: pytest.TempPathFactory) -> str:
    from runtime.collection import collect

    store = collected.store()
    root = tmp_path_factory.mktemp("replay-run")
    run_id = prepare_demo_run(store, root / "out", collected.catalog, batches=1,
                              episodes_per_batch=1, settle_steps=10, cameras=False)
    assert collect(run_id, store=store, progress=False).accepted == 1
    return run_id


def test_exported_states_replay_exactly(
    collected: CollectedRun, state_only_run: str, tmp_path: Path
) -> None:
    import h5py

    out = tmp_path / "replay.hdf5"
    export_runs(collected.store(), [state_only_run], DatasetSpec("robomimic", out))
    with h5py.File(out, "r") as handle:
        env_args = json.loads(handle["data"].attrs["env_args"])["env_kwargs"]
        demo = handle["data/demo_0"]
        states, actions = demo["states"][()], demo["actions"][()]
        mjb = handle[demo.attrs["model_mjb"]][()].tobytes()
        text = demo.attrs["model_file"]
    (tmp_path / "scene.mjb").write_bytes(mjb)
    model = mujoco.MjModel.from_binary_path(str(tmp_path / "scene.mjb"))
    rounded = mujoco.MjModel.from_xml_string(text)  # the MJCF compiles to the same scene
    assert (rounded.nq, rounded.nv, rounded.nu, rounded.nbody) == (
        model.nq, model.nv, model.nu, model.nbody)
    described = env_args["states"]
    assert described["layout"] == "mj_getState" and described["replayable"]
    signature, substeps = described["signature"], described["substeps"]
    # Elements this model has none of (history, plugin state...) are not named in the file;
    # the signature read back selects exactly the numbers that were captured.
    assert signature & physics_state.SIGNATURE == signature
    assert mujoco.mj_stateSize(model, signature) == mujoco.mj_stateSize(
        model, physics_state.SIGNATURE)
    assert states.shape == (len(actions), mujoco.mj_stateSize(model, signature))
    actuators = [model.actuator(name).id for name in env_args["names"]["actions"]]
    data = mujoco.MjData(model)
    steps = len(actions) - 1
    checked = sorted({0, 1, 2, steps // 3, steps // 2, steps - 1})
    for t in checked:
        mujoco.mj_resetData(model, data)
        physics_state.restore(model, data, states[t], signature)
        data.ctrl[actuators] = actions[t]
        mujoco.mj_step(model, data, nstep=substeps)
        np.testing.assert_array_equal(
            physics_state.capture(model, data, signature), states[t + 1], err_msg=f"step {t}"
        )
    # A whole stretch, stepping on from the replayed state itself, stays exact too.
    mujoco.mj_resetData(model, data)
    physics_state.restore(model, data, states[0], signature)
    for t in range(min(steps, 40)):
        data.ctrl[actuators] = actions[t]
        mujoco.mj_step(model, data, nstep=substeps)
    np.testing.assert_array_equal(
        physics_state.capture(model, data, signature), states[min(steps, 40)]
    )


def test_lerobot_leaves_the_physics_state_out(collected: CollectedRun, tmp_path: Path) -> None:
    out = tmp_path / "lerobot"
    export_runs(collected.store(), [collected.run_id], DatasetSpec("lerobot", out))
    features = json.loads((out / "meta" / "info.json").read_text())["features"]
    assert not [key for key in features if "physics_state" in key]


def test_runs_recorded_before_the_physics_state_still_export(
    collected: CollectedRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older trajectory has no `physics_state`: `states` falls back to the composite
    vector it always had, and env_args says it is not replayable."""
    import h5py

    from runtime.export.episodes import CommittedEpisode, EpisodeData

    real = CommittedEpisode.load

    def without_state(self: CommittedEpisode) -> EpisodeData:
        data = real(self)
        arrays = {k: v for k, v in data.arrays.items() if k != physics_state.KEY}
        return EpisodeData(arrays, data.metadata, data.cameras, data.videos)

    monkeypatch.setattr(CommittedEpisode, "load", without_state)
    out = tmp_path / "old.hdf5"
    export_runs(collected.store(), [collected.run_id], DatasetSpec("robomimic", out))
    with h5py.File(out, "r") as handle:
        described = json.loads(handle["data"].attrs["env_args"])["env_kwargs"]["states"]
        demo = handle["data/demo_0"]
        assert demo["states"].shape[1] == 7 + 7 + 14  # robot qpos, qvel, entity poses
    assert described == {"layout": "robot_qpos+robot_qvel+entity_pose", "replayable": False}
