"""The skills, checks, recorder and determinism guarantees on the Franka Panda arm."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
import yaml

from runtime.sim import (
    SceneBuildError,
    TaskEnvironment,
    TrajectoryRecorder,
    checks_accept,
    commit_trajectory,
    trajectory_bytes,
)
from tests.runtime.sim_fixtures import task_mapping, write_deployment

ARM = {"kind": "franka_panda"}


def _model_bytes(model: mujoco.MjModel) -> bytes:
    buffer = np.zeros(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buffer)
    return buffer.tobytes()


@pytest.fixture(scope="module")
def deployments(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("arm")
    return {
        "small": write_deployment(root / "small", robot=ARM),
        "other": write_deployment(
            root / "other", item_size=(0.03, 0.05, 0.045), bin_size=(0.22, 0.16, 0.07), robot=ARM
        ),
        "wide": write_deployment(root / "wide", item_size=(0.09, 0.09, 0.04), robot=ARM),
    }


@pytest.fixture(scope="module")
def small_env(deployments: dict[str, Path]) -> TaskEnvironment:
    return TaskEnvironment.from_deployment(deployments["small"])


def _episode(env: TaskEnvironment, seed: int) -> tuple[bytes, bool, tuple]:
    env.reset(seed)
    recorder = TrajectoryRecorder.for_environment(env)
    program = env.run_program(recorder)
    final = env.run_checks(env.task.checks.final)
    return trajectory_bytes(recorder.to_payload({"seed": seed})), program.completed, final


def test_arm_picks_a_block_and_places_it_in_the_bin(small_env: TaskEnvironment) -> None:
    env = small_env
    env.reset(5)
    assert checks_accept(env.run_checks(env.task.checks.initial))
    recorder = TrajectoryRecorder.for_environment(env)
    program = env.run_program(recorder)
    assert program.completed, program.detail
    final = env.run_checks(env.task.checks.final)
    assert checks_accept(final), [c.to_dict() for c in final]
    payload = recorder.to_payload({"seed": 5})
    steps = recorder.num_actions
    assert payload["observation.state"].shape == (steps + 1, 8)
    assert payload["observation.velocity"].shape == (steps + 1, 7)
    assert payload["observation.ee_pose"].shape == (steps + 1, 7)
    assert payload["action.joint_position"].shape == (steps, 8)
    assert payload["action.ee_delta"].shape == (steps, 7)
    assert payload["entity_pose"].shape == (steps + 1, 2, 7)
    # the gripper width of the state is the sum of the finger joints, within the 8 cm stroke
    width = payload["observation.state"][:, 7]
    assert torch.allclose(width, payload["finger_width"]) and float(width.max()) <= 0.0801
    quat_norm = payload["observation.ee_pose"][:, 3:].norm(dim=1)
    assert torch.allclose(quat_norm, torch.ones_like(quat_norm), atol=1e-9)
    meta = json.loads(payload["metadata"])
    columns = meta["columns"]
    for key, tensor in payload.items():
        if key == "metadata":
            continue
        assert key in columns, key
        width_of = 1 if tensor.dim() == 1 else tensor.shape[-1] * (
            tensor.shape[1] if tensor.dim() == 3 else 1
        )
        assert len(columns[key]["names"]) == len(columns[key]["units"]) == width_of, key
    assert columns["observation.state"]["units"][-1] == "m"
    # the wrist camera mount is a body of the hand: it sits right above the TCP, pointing down
    mount = env.data.body(env.robot.wrist_mount_body)
    tcp = env.data.site(env.robot.tcp_site)
    assert np.linalg.norm(mount.xpos - tcp.xpos) < 0.2 and mount.xpos[2] > tcp.xpos[2]
    assert columns["action.ee_delta"]["names"][:3] == ["dx", "dy", "dz"]


def test_joint_targets_respect_the_joint_limits(small_env: TaskEnvironment) -> None:
    env = small_env
    env.reset(6)
    recorder = TrajectoryRecorder.for_environment(env)
    env.run_program(recorder)
    targets = recorder.to_payload({})["action.joint_position"][:, :7].numpy()
    limits = env.model.jnt_range[[env.model.joint(j).id for j in env.robot.joint_names[:7]]]
    assert np.all(targets >= limits[:, 0] - 1e-9) and np.all(targets <= limits[:, 1] + 1e-9)


def test_object_too_wide_for_the_panda_hand_is_refused_by_pick(
    deployments: dict[str, Path],
) -> None:
    env = TaskEnvironment.from_deployment(deployments["wide"])
    env.reset(0)
    program = env.run_program(None)
    assert not program.completed
    assert program.detail.startswith("step 0 (pick item): object 'item' is 0.090 m wide")
    assert "the gripper opens 0.080 m" in program.detail


def test_stuck_gripper_release_is_rejected_by_place(
    small_env: TaskEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.sim.skills import pick, place

    env = small_env
    env.reset(5)
    picked = pick(env, env.task.program[0], None)
    assert picked.completed, picked.detail
    # the hand's motor fails after the grasp: whatever opening is commanded, it keeps squeezing
    monkeypatch.setattr(env.robot, "finger_ctrl", lambda half: np.zeros(2))
    placed = place(env, env.task.program[1], None)
    monkeypatch.undo()
    assert not placed.completed
    assert placed.detail == "object 'item' is still in contact with a finger after opening"


def test_unreachable_pose_is_a_clear_skill_failure(small_env: TaskEnvironment) -> None:
    env = small_env
    env.reset(None)
    adr = env._entity_qpos["item"]
    env.data.qpos[adr : adr + 2] = (1.5, 0.0)  # pushed far beyond the arm's reach
    mujoco.mj_forward(env.model, env.data)
    program = env.run_program(None)
    assert program.detail == "step 0 (pick item): unreachable pre-grasp pose"


def test_unreachable_entity_is_refused_when_the_environment_is_built(tmp_path: Path) -> None:
    mapping = task_mapping(
        {"primitive": "box", "size_m": [0.04, 0.04, 0.04]},
        {"primitive": "box", "size_m": [0.1, 0.1, 0.05]},
        robot={"kind": "franka_panda", "base_position_m": [-1.9, 0.0]},
        table_m=(4.0, 4.0),
        positions=((1.5, 0.0), (0.0, 0.15)),
    )
    (tmp_path / "task.yaml").write_text(yaml.safe_dump(mapping, sort_keys=False))
    with pytest.raises(SceneBuildError) as caught:
        TaskEnvironment.from_deployment(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'task.yaml'}: scene.entities[0].position_m: entity 'item' at (1.5, 0.0) "
        "is out of reach of the franka_panda (no top-down gripper pose 0.02 m above the table "
        "there)"
    )


def test_replaced_arm_environment_steps_bit_identically_to_fresh(
    deployments: dict[str, Path],
) -> None:
    replaced = TaskEnvironment.from_deployment(deployments["small"])
    replaced.replace_assets(deployments["other"])
    fresh = TaskEnvironment.from_deployment(deployments["other"])
    assert _model_bytes(replaced.model) == _model_bytes(fresh.model)
    a, completed, _ = _episode(replaced, 11)
    b, _, _ = _episode(fresh, 11)
    assert completed and a == b


_CHILD = """
import sys
from pathlib import Path
from runtime.sim import TaskEnvironment, TrajectoryRecorder, commit_trajectory
env = TaskEnvironment.from_deployment(Path(sys.argv[1]))
env.reset(3)
recorder = TrajectoryRecorder.for_environment(env)
env.run_program(recorder)
print(commit_trajectory(recorder.to_payload({"seed": 3}), Path(sys.argv[2])).sha256)
"""


def test_arm_trajectory_bytes_are_identical_across_processes(
    deployments: dict[str, Path], tmp_path: Path
) -> None:
    paths = [tmp_path / "a.pt", tmp_path / "b.pt"]
    digests = [
        subprocess.run(
            [sys.executable, "-c", _CHILD, str(deployments["small"]), str(path)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()[-1]
        for path in paths
    ]
    assert digests[0] == digests[1]
    assert paths[0].read_bytes() == paths[1].read_bytes()
    env = TaskEnvironment.from_deployment(deployments["small"])
    env.reset(3)
    recorder = TrajectoryRecorder.for_environment(env)
    env.run_program(recorder)
    here = commit_trajectory(recorder.to_payload({"seed": 3}), tmp_path / "here.pt")
    assert here.sha256 == digests[0]


def test_pour_on_the_arm_tilts_the_hand_then_puts_the_object_back(tmp_path: Path) -> None:
    deployment = write_deployment(
        tmp_path / "pour",
        item_size=(0.04, 0.04, 0.06),
        robot=ARM,
        program=[
            {"skill": "pick", "object": "item"},
            {"skill": "pour", "object": "item", "target": "bin", "params": {"tilt_deg": 90}},
        ],
    )
    env = TaskEnvironment.from_deployment(deployment)
    env.reset(1)
    recorder = TrajectoryRecorder.for_environment(env)
    tilts: list[float] = []
    original = env.step_control

    def watch(rec: TrajectoryRecorder | None) -> None:
        original(rec)
        tilts.append(float(env.tcp()[4]))

    env.step_control = watch  # type: ignore[method-assign]
    result = env.run_program(recorder)
    assert result.completed, result.detail
    assert max(abs(t) for t in tilts) == pytest.approx(np.pi / 2, abs=0.08)
    assert abs(tilts[-1]) < 0.05
    assert env.held is None
    pos, rot = env.entity_pose("item")
    assert abs(float(pos[2])) < 0.003 and rot[2, 2] > 0.99
    assert np.linalg.norm(pos[:2] - np.array([0.0, -0.15])) < 0.02


def _bad_task(tmp_path: Path, robot: dict) -> Path:
    mapping = task_mapping(
        {"primitive": "box", "size_m": [0.04, 0.04, 0.04]},
        {"primitive": "box", "size_m": [0.1, 0.1, 0.05]},
        robot=robot,
    )
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(mapping, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("robot", "message"),
    [
        (
            {"kind": "ur5e"},
            "scene.robot.kind: unknown robot kind 'ur5e'; expected one of parallel_gripper, "
            "franka_panda",
        ),
        (
            {"kind": "franka_panda", "base_position_m": [0.5, 0.0]},
            "scene.robot.base_position_m: robot base (0.5, 0.0) is outside the table "
            "(0.8 x 0.8 m centred at the origin)",
        ),
        (
            {"kind": "franka_panda", "max_opening_m": 0.1},
            "scene.robot.max_opening_m: the franka_panda gripper opens at most 0.08 m",
        ),
    ],
)
def test_bad_robot_section_is_one_line_naming_the_field(
    tmp_path: Path, robot: dict, message: str
) -> None:
    from domain.errors import ConfigError
    from runtime.taskfile import load_task

    path = _bad_task(tmp_path, robot)
    with pytest.raises(ConfigError) as caught:
        load_task(path)
    assert str(caught.value) == f"{path}: {message}"


def test_cli_refuses_an_unreachable_entity_before_anything_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from runtime.cli import main

    mapping = task_mapping(
        {"primitive": "box", "size_m": [0.04, 0.04, 0.04]},
        {"primitive": "box", "size_m": [0.1, 0.1, 0.05]},
        robot={"kind": "franka_panda", "base_position_m": [-1.9, 0.0]},
        table_m=(4.0, 4.0),
        positions=((1.5, 0.0), (0.0, 0.15)),
    )
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump(mapping, sort_keys=False))
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    db = tmp_path / "a.db"
    code = main(
        ["run", str(task), "--catalog", f"item={catalog}", "--catalog", f"bin={catalog}",
         "--out", str(tmp_path / "out"), "--db", f"sqlite:///{db}"]
    )
    assert code == 2
    assert capsys.readouterr().err == (
        f"assetcast: error: {task}: scene.entities[0].position_m: entity 'item' at (1.5, 0.0) "
        "is out of reach of the franka_panda (no top-down gripper pose 0.02 m above the table "
        "there)\n"
    )
    assert not db.exists() and not (tmp_path / "out").exists()


def test_demo_shows_the_three_fates_on_the_arm(tmp_path: Path) -> None:
    import dataclasses

    from runtime.demo import DEMO_CONFIG, run_demo
    from store import EventStore

    result = run_demo(
        tmp_path / "demo", cfg=dataclasses.replace(DEMO_CONFIG, episodes_per_batch=1),
        progress=False,
    )
    events = EventStore(result.db_url).read(result.run_id)
    reasons = {
        e.payload["batch_index"]: e.payload["reason"] for e in events if e.type == "EpisodeJudged"
    }
    assert reasons == {0: "final_checks_failed", 1: "program_incomplete", 2: "accepted"}
    [refused] = [
        e.payload["detail"]
        for e in events
        if e.type == "EpisodeExecuted" and e.payload["batch_index"] == 1
    ]
    assert refused.startswith("step 0 (pick item): object 'item' is 0.110 m wide")
    assert "franka_panda" in (result.task_path).read_text()


def test_position_control_with_gravity_compensation_holds_the_commanded_pose(
    small_env: TaskEnvironment,
) -> None:
    env = small_env
    m = env.model
    bodies = [m.jnt_bodyid[m.joint(j).id] for j in env.robot.joint_names]
    assert all(m.body_gravcomp[b] == 1.0 for b in bodies)
    assert all(m.jnt_actgravcomp[m.joint(j).id] for j in env.robot.joint_names)
    env.reset(None)
    assert env.move_tcp(None, x=0.15, y=0.1, z=0.15, yaw=0.3, waypoint="test")
    env.hold(None, intervals=50)  # one second later it has not sagged
    error = env.tcp() - np.array([0.15, 0.1, 0.15, 0.3, 0.0])
    assert np.linalg.norm(error[:3]) < 0.003 and np.max(np.abs(error[3:])) < 0.02
