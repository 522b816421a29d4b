"""Scene building, acceptance of the pick-and-place program, and asset replacement."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from domain.errors import AssetcastInputError
from runtime.sim import (
    SceneMismatch,
    TaskEnvironment,
    TrajectoryRecorder,
    checks_accept,
    trajectory_bytes,
)
from tests.runtime.sim_fixtures import write_deployment

PLATE = {
    "entity_id": "plate",
    "position_m": [0.25, 0.0],
    "yaw_deg": 15.0,
    "asset": {"primitive": "box", "size_m": [0.1, 0.1, 0.01]},
}


def _model_bytes(model: mujoco.MjModel) -> bytes:
    buffer = np.zeros(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buffer)
    return buffer.tobytes()


def _episode(env: TaskEnvironment, seed: int) -> tuple[bytes, bool, tuple]:
    env.reset(seed)
    initial = env.run_checks(env.task.checks.initial)
    recorder = TrajectoryRecorder.for_environment(env)
    program = env.run_program(recorder)
    final = env.run_checks(env.task.checks.final)
    payload = recorder.to_payload({"seed": seed})
    return trajectory_bytes(payload), program.completed, (initial, final)


@pytest.fixture(scope="module")
def deployments(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("deployments")
    return {
        "small": write_deployment(root / "small", extra_entities=[PLATE]),
        "other": write_deployment(
            root / "other",
            item_size=(0.03, 0.05, 0.045),
            bin_size=(0.22, 0.16, 0.07),
            extra_entities=[PLATE],
        ),
        "wide": write_deployment(root / "wide", item_size=(0.12, 0.12, 0.04)),
        "tall": write_deployment(root / "tall", item_size=(0.06, 0.06, 0.09)),
    }


def test_small_block_into_wide_bin_is_accepted(deployments: dict[str, Path]) -> None:
    env = TaskEnvironment.from_deployment(deployments["small"], settle_steps=20)
    env.reset(7)
    initial = env.run_checks(env.task.checks.initial)
    assert [(c.name, c.status) for c in initial] == [
        ("at_rest", "passed"),
        ("upright", "passed"),
        ("on_table", "passed"),
        ("no_penetration", "passed"),
    ]
    program = env.run_program(None)
    assert program.completed, program.detail
    assert [(s.skill, s.completed) for s in program.skills] == [("pick", True), ("place", True)]
    assert program.steps > 0 and program.steps == sum(s.steps for s in program.skills)
    final = env.run_checks(env.task.checks.final)
    assert [(c.name, c.status) for c in final] == [
        ("inside_region", "passed"),
        ("at_rest", "passed"),
    ]
    assert final[0].metrics["min_margin_m"] >= 0.0
    assert checks_accept(initial) and checks_accept(final)
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.reset(0)


def test_mass_comes_from_mesh_volume_and_density(deployments: dict[str, Path]) -> None:
    env = TaskEnvironment.from_deployment(deployments["small"])
    item = env.model.body("entity_item").id
    # 4 cm cube x 500 kg/m^3 (the default density)
    assert env.model.body_mass[item] == pytest.approx(0.04**3 * 500.0, rel=1e-6)
    # the open bin is 5 convex pieces -> 5 mesh geoms
    bin_body = env.model.body("entity_bin").id
    assert int(np.sum(env.model.geom_bodyid == bin_body)) == 5


def test_item_wider_than_gripper_fails_pick_without_crash(deployments: dict[str, Path]) -> None:
    env = TaskEnvironment.from_deployment(deployments["wide"])
    env.reset(0)
    program = env.run_program(None)
    assert not program.completed
    assert len(program.skills) == 1 and program.skills[0].skill == "pick"
    assert not program.skills[0].completed
    assert "0.120 m wide" in program.skills[0].detail
    assert "gripper opens 0.090 m" in program.detail


def test_item_larger_than_container_fails_inside_region(deployments: dict[str, Path]) -> None:
    env = TaskEnvironment.from_deployment(deployments["tall"])
    env.reset(0)
    assert env.run_program(None).completed
    final = env.run_checks(env.task.checks.final)
    inside = final[0]
    assert inside.name == "inside_region" and inside.status == "failed"
    assert "side top" in inside.detail
    assert not checks_accept(final)


def test_replacement_keeps_robot_table_and_kept_entities(deployments: dict[str, Path]) -> None:
    env = TaskEnvironment.from_deployment(deployments["small"])
    before = env.model
    geoms_before = {before.geom(i).name: before.geom_size[i].copy() for i in range(before.ngeom)}
    bodies_before = [before.body(i).name for i in range(before.nbody)]
    info = env.replace_assets(deployments["other"])
    assert info.roles_replaced == ("bin", "item")
    assert info.entities_kept == ("plate",)
    assert env.constructions == 1 and env.replacements == 1
    after = env.model
    assert [after.body(i).name for i in range(after.nbody)] == bodies_before
    for name in ("table", "palm", "finger_left_pad", "finger_right_pad", "entity_plate_geom"):
        assert np.array_equal(after.geom(name).size, geoms_before[name])
    robot_bodies = [n for n in bodies_before if n.endswith("_link")]
    for name in robot_bodies:
        assert after.body(name).mass == pytest.approx(before.body(name).mass)
    assert after.body("entity_item").mass != pytest.approx(before.body("entity_item").mass)
    assert env.asset_identities()["item"]["asset_id"] == "block-0.03x0.05x0.045"


def test_replaced_environment_steps_bit_identically_to_fresh(
    deployments: dict[str, Path],
) -> None:
    replaced = TaskEnvironment.from_deployment(deployments["small"])
    replaced.replace_assets(deployments["other"])
    fresh = TaskEnvironment.from_deployment(deployments["other"])
    assert _model_bytes(replaced.model) == _model_bytes(fresh.model)
    a, completed, _ = _episode(replaced, 11)
    b, _, _ = _episode(fresh, 11)
    assert completed and a == b
    # and back again: replacing to the first deployment equals building it fresh
    replaced.replace_assets(deployments["small"])
    original = TaskEnvironment.from_deployment(deployments["small"])
    assert _model_bytes(replaced.model) == _model_bytes(original.model)


def _variant(source: Path, target: Path, mutate) -> Path:
    import shutil

    shutil.copytree(source, target)
    mapping = yaml.safe_load((target / "task.yaml").read_text())
    mutate(mapping)
    (target / "task.yaml").write_text(yaml.safe_dump(mapping, sort_keys=False))
    return target


def test_replacement_with_different_table_is_refused_before_touching_model(
    deployments: dict[str, Path], tmp_path: Path
) -> None:
    env = TaskEnvironment.from_deployment(deployments["small"])
    snapshot = _model_bytes(env.model)
    model = env.model

    def bigger_table(mapping: dict) -> None:
        mapping["scene"]["table"]["size_m"] = [1.0, 1.0]

    changed = _variant(deployments["other"], tmp_path / "table", bigger_table)
    with pytest.raises(SceneMismatch, match=r"task\.yaml: scene\.table differs") as caught:
        env.replace_assets(changed)
    assert isinstance(caught.value, AssetcastInputError)
    assert env.model is model and _model_bytes(env.model) == snapshot

    def moved_plate(mapping: dict) -> None:
        mapping["scene"]["entities"][2]["position_m"] = [0.3, 0.0]

    moved = _variant(deployments["other"], tmp_path / "plate", moved_plate)
    with pytest.raises(SceneMismatch, match="non-role entity 'plate' moved"):
        env.replace_assets(moved)

    def robot(mapping: dict) -> None:
        mapping["scene"]["robot"]["max_opening_m"] = 0.12

    with pytest.raises(SceneMismatch, match=r"scene\.robot differs"):
        env.replace_assets(_variant(deployments["other"], tmp_path / "robot", robot))
    assert _model_bytes(env.model) == snapshot
    assert env.replacements == 0


def test_reset_is_deterministic_and_noise_is_bounded(deployments: dict[str, Path]) -> None:
    env = TaskEnvironment.from_deployment(deployments["small"])
    env.reset(5)
    first = env.data.qpos.copy()
    env.reset(5)
    assert np.array_equal(env.data.qpos, first)
    env.reset(6)
    assert not np.array_equal(env.data.qpos, first)
    pos, _ = env.entity_pose("item")
    assert abs(pos[0] - 0.0) <= 0.005 and abs(pos[1] + 0.15) <= 0.005
    plate, _ = env.entity_pose("plate")
    assert plate[:2].tolist() == [0.25, 0.0]  # non-role entities get no noise


def test_reset_none_restores_the_nominal_scene_after_an_episode(
    deployments: dict[str, Path],
) -> None:
    env = TaskEnvironment.from_deployment(deployments["small"], settle_steps=20)
    env.reset(None)
    nominal_qpos = env.data.qpos.copy()
    assert env.data.time == 0.0  # no settling
    for eid in env.order:
        pos, rot = env.entity_pose(eid)
        entity = env.task.entity(eid)
        assert pos.tolist() == [*entity.position_m, 0.0]  # exactly the task pose, no noise
        yaw = np.degrees(np.arctan2(rot[1, 0], rot[0, 0]))
        assert yaw == pytest.approx(entity.yaw_deg, abs=1e-9)
    assert env.finger_width() == pytest.approx(env.layout.max_opening_m)

    noisy_bytes, completed, _ = _episode(env, 11)
    assert completed and env.held is None
    assert not np.array_equal(env.data.qpos, nominal_qpos)
    env.held = "item"  # as if an episode were interrupted while holding
    env.reset(None)
    assert env.held is None and env.program_steps == 0
    assert np.array_equal(env.data.qpos, nominal_qpos)
    assert not np.any(env.data.qvel)
    assert checks_accept(env.run_checks(env.task.checks.initial))
    # a seeded reset after a nominal one is unchanged (same bytes as before)
    assert _episode(env, 11)[0] == noisy_bytes
