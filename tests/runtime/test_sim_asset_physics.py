"""Per-asset physics reaches the simulator: a descriptor's mass, density and friction are
the model's, and a heavier asset really presses harder on the table."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from runtime.sim import TaskEnvironment
from runtime.sim.contact import OBJECT_FRICTION
from runtime.sim.errors import SceneBuildError
from tests.runtime.sim_fixtures import write_deployment

CUBE_M3 = 0.04**3


def _item_geoms(env: TaskEnvironment) -> np.ndarray:
    body = env.model.body("entity_item").id
    return np.flatnonzero(env.model.geom_bodyid == body)


def _weight_on_table(env: TaskEnvironment, steps: int = 400) -> float:
    """Sum of the normal contact forces between the item and the table after settling."""
    env.reset(None)
    for _ in range(steps):
        mujoco.mj_step(env.model, env.data)
    table = env.model.geom("table").id
    item = set(_item_geoms(env).tolist())
    total = 0.0
    force = np.zeros(6)
    for index in range(env.data.ncon):
        contact = env.data.contact[index]
        if {contact.geom1, contact.geom2} & item and table in (contact.geom1, contact.geom2):
            mujoco.mj_contactForce(env.model, env.data, index, force)
            total += float(force[0])
    return total


def test_mass_density_and_friction_come_from_the_descriptor(tmp_path: Path) -> None:
    default = TaskEnvironment.from_deployment(write_deployment(tmp_path / "default"))
    heavy = TaskEnvironment.from_deployment(write_deployment(
        tmp_path / "heavy", item_physics={"mass_kg": 1.5, "friction": {"sliding": 0.4}}
    ))
    dense = TaskEnvironment.from_deployment(write_deployment(
        tmp_path / "dense", item_physics={"density_kg_m3": 2700.0}
    ))
    mass = {
        name: float(env.model.body_mass[env.model.body("entity_item").id])
        for name, env in (("default", default), ("heavy", heavy), ("dense", dense))
    }
    assert mass["default"] == pytest.approx(CUBE_M3 * 500.0, rel=1e-6)
    assert mass["heavy"] == pytest.approx(1.5, rel=1e-9)
    assert mass["dense"] == pytest.approx(CUBE_M3 * 2700.0, rel=1e-6)
    for geom in _item_geoms(heavy):
        assert tuple(heavy.model.geom_friction[geom]) == pytest.approx(
            (0.4, OBJECT_FRICTION[1], OBJECT_FRICTION[2])
        )
    for geom in _item_geoms(default):
        assert tuple(default.model.geom_friction[geom]) == pytest.approx(OBJECT_FRICTION)
    gravity = float(-heavy.model.opt.gravity[2])
    assert _weight_on_table(heavy) == pytest.approx(1.5 * gravity, rel=0.05)
    assert _weight_on_table(default) == pytest.approx(mass["default"] * gravity, rel=0.05)
    for env in (default, heavy, dense):
        env.close()


def test_replacing_an_asset_that_differs_only_in_mass_changes_the_model(tmp_path: Path) -> None:
    env = TaskEnvironment.from_deployment(write_deployment(tmp_path / "light"))
    info = env.replace_assets(
        write_deployment(tmp_path / "heavy", item_physics={"mass_kg": 0.9})
    )
    assert "item" in info.roles_replaced
    assert float(env.model.body_mass[env.model.body("entity_item").id]) == pytest.approx(0.9)
    env.close()


def test_a_deployed_descriptor_with_bad_physics_is_refused_naming_the_field(
    tmp_path: Path,
) -> None:
    directory = write_deployment(tmp_path / "bad", item_physics={"mass_kg": -2})
    [catalog] = [
        p for p in (directory / "assets").glob("*/asset.catalog.json") if "block" in p.read_text()
    ]
    with pytest.raises(SceneBuildError) as caught:
        TaskEnvironment.from_deployment(directory)
    assert str(caught.value) == (
        f"entity 'item': {catalog}: descriptor.physics.mass_kg: must be positive, got -2"
    )
