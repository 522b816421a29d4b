"""Check and skill registries (fail closed), pouring, and byte-deterministic trajectories."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from domain.task import CheckSpec
from runtime.sim import (
    CheckResult,
    SkillResult,
    TaskEnvironment,
    TrajectoryRecorder,
    checks_accept,
    commit_trajectory,
    register_check,
    register_skill,
)
from tests.runtime.sim_fixtures import write_deployment


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> TaskEnvironment:
    deployment = write_deployment(tmp_path_factory.mktemp("checks") / "batch_0000")
    return TaskEnvironment.from_deployment(deployment)


def test_checks_accept_requires_nonempty_all_passed() -> None:
    passed = CheckResult("a", "passed")
    assert checks_accept([passed])
    assert not checks_accept([])
    assert not checks_accept([passed, CheckResult("b", "failed")])
    assert not checks_accept([passed, CheckResult("c", "unavailable")])
    with pytest.raises(ValueError, match="check status"):
        CheckResult("d", "maybe")  # type: ignore[arg-type]


def test_raising_or_unknown_checks_are_unavailable_and_reject(env: TaskEnvironment) -> None:
    def broken(env: TaskEnvironment, spec: CheckSpec) -> CheckResult:
        raise ZeroDivisionError("boom")

    register_check("test_broken", broken)
    register_check("test_always", lambda env, spec: True)
    env.reset(0)
    results = env.run_checks(
        [CheckSpec("test_always"), CheckSpec("test_broken"), CheckSpec("no_such_check")]
    )
    assert [r.status for r in results] == ["passed", "unavailable", "unavailable"]
    assert results[1].detail == "check raised ZeroDivisionError: boom"
    assert "unknown check 'no_such_check'" in results[2].detail
    assert not checks_accept(results)
    assert checks_accept(results[:1])


def test_checks_missing_geometry_are_unavailable(env: TaskEnvironment) -> None:
    env.reset(0)
    (no_target, no_region) = env.run_checks(
        [CheckSpec("inside_region", object="item"), CheckSpec("on_region", "item", "bin")]
    )
    assert no_target.status == "unavailable" and "needs a target" in no_target.detail
    assert no_region.status == "unavailable"
    assert no_region.detail == "target 'bin' declares no support_region"
    (bad_param,) = env.run_checks([CheckSpec("at_rest", params={"linear_m_s": "fast"})])
    assert bad_param.status == "unavailable" and "params.linear_m_s" in bad_param.detail


def test_initial_check_detects_object_off_the_table(env: TaskEnvironment) -> None:
    env.reset(0)
    adr = env._entity_qpos["item"]
    env.data.qpos[adr + 2] = 0.05  # hovering
    (on_table,) = env.run_checks([CheckSpec("on_table")])
    assert on_table.status == "failed" and "'item' bottom is at z=0.0500" in on_table.detail


def test_registered_and_unknown_skills(tmp_path: Path) -> None:
    calls: list[str] = []

    def wave(env: TaskEnvironment, step, recorder) -> SkillResult:
        env.hold(recorder, intervals=2)
        calls.append(step.object)
        return SkillResult(step.skill, step.object, True, "waved")

    register_skill("test_wave", wave)
    deployment = write_deployment(
        tmp_path / "b",
        program=[
            {"skill": "test_wave", "object": "item"},
            {"skill": "juggle", "object": "item"},
            {"skill": "pick", "object": "item"},
        ],
    )
    env = TaskEnvironment.from_deployment(deployment)
    env.reset(0)
    result = env.run_program(None)
    assert calls == ["item"]
    assert not result.completed
    assert [(s.skill, s.completed) for s in result.skills] == [
        ("test_wave", True),
        ("juggle", False),
    ]
    assert result.skills[0].steps == 20
    assert "unknown skill 'juggle'" in result.detail


def test_pour_tilts_the_wrist_keeps_the_object_then_puts_it_back(tmp_path: Path) -> None:
    deployment = write_deployment(
        tmp_path / "pour",
        item_size=(0.04, 0.04, 0.06),
        program=[
            {"skill": "pick", "object": "item"},
            {"skill": "pour", "object": "item", "target": "bin", "params": {"tilt_deg": 90}},
        ],
    )
    env = TaskEnvironment.from_deployment(deployment)
    env.reset(1)
    recorder = TrajectoryRecorder.for_environment(env)
    result = env.run_program(recorder)
    assert result.completed, result.detail
    payload = recorder.to_payload({})
    tilt = payload["robot_qpos"][:, 4]
    assert float(tilt.max()) == pytest.approx(1.5708, abs=0.05)
    assert abs(float(tilt[-1])) < 0.05
    # grasped through the whole tilt: the fingers never closed on nothing
    at_max = int(np.argmax(tilt))
    assert float(payload["finger_width"][at_max]) > 0.03
    # then set down upright near where it was picked up, released
    assert env.held is None
    pos, rot = env.entity_pose("item")
    assert abs(float(pos[2])) < 0.003 and rot[2, 2] > 0.99
    assert np.linalg.norm(pos[:2] - np.array([0.0, -0.15])) < 0.02


def _record(env: TaskEnvironment, seed: int, path: Path):
    env.reset(seed)
    recorder = TrajectoryRecorder.for_environment(env)
    program = env.run_program(recorder)
    final = env.run_checks(env.task.checks.final)
    metadata = {
        "task_id": env.task.task_id,
        "batch_index": 0,
        "episode_index": seed,
        "seed": seed,
        "asset_set_id": "fixture-set",
        "assets": env.asset_identities(),
        "checks": [c.to_dict() for c in final],
    }
    return program, recorder, commit_trajectory(recorder.to_payload(metadata), path)


def test_same_seed_gives_byte_identical_file_and_different_seed_differs(
    env: TaskEnvironment, tmp_path: Path
) -> None:
    program, recorder, first = _record(env, 3, tmp_path / "a.pt")
    _, _, again = _record(env, 3, tmp_path / "b.pt")
    _, _, other = _record(env, 4, tmp_path / "c.pt")
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
    assert first.sha256 == again.sha256 != other.sha256
    data = (tmp_path / "a.pt").read_bytes()
    assert first.bytes == len(data) and first.sha256 == hashlib.sha256(data).hexdigest()
    assert first.path == str(tmp_path / "a.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt", "b.pt", "c.pt"]  # no temp files

    loaded = torch.load(tmp_path / "a.pt", weights_only=True)
    steps = recorder.num_actions
    assert steps == program.steps // 10
    assert loaded["actions"].shape == (steps, 7)
    assert loaded["robot_qpos"].shape == (steps + 1, 7)
    assert loaded["robot_qvel"].shape == (steps + 1, 7)
    assert loaded["entity_pose"].shape == (steps + 1, 2, 7)
    assert loaded["finger_width"].shape == (steps + 1,)
    assert loaded["timestamps"].shape == (steps + 1,)
    assert torch.all(loaded["timestamps"][1:] > loaded["timestamps"][:-1])
    meta = json.loads(loaded["metadata"])
    assert meta["seed"] == 3 and meta["entity_ids"] == ["item", "bin"]
    assert meta["assets"]["bin"]["content_sha256"] == env.geometries["bin"].content_sha256
    assert len(meta["assets"]["item"]["content_sha256"]) == 64
    assert [c["status"] for c in meta["checks"]] == ["passed", "passed"]


def test_recorder_requires_initial_observation() -> None:
    recorder = TrajectoryRecorder(["item"], ["j"])
    with pytest.raises(RuntimeError, match="before begin"):
        recorder.record([0.0], {})
    with pytest.raises(RuntimeError, match="nothing recorded"):
        recorder.to_payload({})


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


def test_trajectory_bytes_are_identical_across_processes(
    env: TaskEnvironment, tmp_path: Path
) -> None:
    import subprocess
    import sys

    env.reset(3)
    recorder = TrajectoryRecorder.for_environment(env)
    env.run_program(recorder)
    here = commit_trajectory(recorder.to_payload({"seed": 3}), tmp_path / "here.pt")
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(env.deployment_dir), str(tmp_path / "child.pt")],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.stdout.strip().splitlines()[-1] == here.sha256
