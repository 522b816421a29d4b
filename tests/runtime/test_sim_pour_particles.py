"""Pouring with particles: the source holds real spheres and `poured_fraction` judges where
they ended up (accepted for a cup that fits the stream, rejected for one that is too small)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from domain.assets import PreparationContext
from domain.errors import ConfigError
from domain.task import parse_task
from runtime.sim import TaskEnvironment, checks_accept
from runtime.sim.particles import MAX_PARTICLES, particle_set
from tests.runtime.sim_fixtures import task_mapping

demo_catalog = pytest.importorskip("runtime.assets.demo_catalog")
cache = pytest.importorskip("runtime.assets.cache")

POUR_CHECK = {"check": "poured_fraction", "source": "item", "target": "bin", "min": 0.8}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("pour")
    context = PreparationContext(cache_dir=str(root / "cache"))
    relpaths = {}
    for package in demo_catalog.write_demo_catalog(root / "catalog"):
        if package.name.startswith(("bottle", "cup")):
            asset = cache.prepare_package(
                package, candidate_id=package.name, locator=str(package), context=context
            )
            relpaths[package.name] = f"cache/{asset.content_sha256}/asset.catalog.json"
    return root, relpaths


ARM = {"kind": "franka_panda"}


def _pour_task(
    root: Path, relpaths: dict[str, str], bottle: str, cup: str, robot: str = "gantry",
    params: dict[str, object] | None = None,
) -> Path:
    suffix = "".join(f"_{key}-{value}" for key, value in (params or {}).items())
    folder = root / f"{robot}_{bottle}_{cup}{suffix}"
    if not folder.exists():
        shutil.copytree(root / "cache", folder / "cache")
        mapping = task_mapping(
            {"package": relpaths[bottle]},
            {"package": relpaths[cup]},
            robot=ARM if robot == "arm" else None,
            program=[
                {"skill": "pick", "object": "item"},
                {"skill": "pour", "object": "item", "target": "bin", "params": params or {}},
            ],
            final_checks=[POUR_CHECK, "at_rest", {"check": "target_upright", "target": "bin"}],
        )
        (folder / "task.yaml").write_text(yaml.safe_dump(mapping, sort_keys=False))
    return folder


def _episode(folder: Path, seed: int) -> tuple[TaskEnvironment, list]:
    env = TaskEnvironment.from_deployment(folder, settle_steps=50)
    env.reset(seed)
    assert checks_accept(env.run_checks(env.task.checks.initial))
    program = env.run_program(None)
    assert program.completed, program.detail
    return env, list(env.run_checks(env.task.checks.final))


def test_the_source_is_filled_deterministically_from_its_cavity_and_mouth(
    prepared: tuple[Path, dict[str, str]],
) -> None:
    root, relpaths = prepared
    env = TaskEnvironment.from_deployment(
        _pour_task(root, relpaths, "bottle-mouth-r015", "cup-r050")
    )
    held = env.particles["item"]
    assert held.count == MAX_PARTICLES and held.radius_m == pytest.approx(0.015 / 4)
    assert "bin" not in env.particles  # only a pour step's object is filled
    env.reset(3)
    first = env.particle_positions("item").copy()
    lower, upper = env.geometries["item"].region("container_region")  # type: ignore[misc]
    local = env.to_entity_frame("item", first)
    assert (local - held.radius_m >= lower - 1e-9).all()
    assert (local + held.radius_m <= upper + 1e-9).all()
    env.reset(3)
    assert (env.particle_positions("item") == first).all()
    # the cup has a cavity too, but no pour step pours from it
    assert particle_set(env.geometries["bin"]) is not None


# (robot, bottle, seed): the gantry's hand holds the 70 mm bottle; the Panda's 80 mm hand takes
# the 60 mm one (it cannot lift the heavier 70 mm bottle).
FITTING = [("gantry", "bottle-mouth-r015", 2), ("arm", "bottle-mouth-r010", 0)]
TOO_SMALL = [("gantry", "bottle-mouth-r015", 1), ("arm", "bottle-mouth-r010", 0)]


@pytest.mark.parametrize(("robot", "bottle", "seed"), FITTING)
def test_pour_into_a_fitting_cup_is_accepted(
    prepared: tuple[Path, dict[str, str]], robot: str, bottle: str, seed: int
) -> None:
    root, relpaths = prepared
    env, final = _episode(_pour_task(root, relpaths, bottle, "cup-r050", robot), seed)
    fraction = final[0]
    assert (fraction.name, fraction.status) == ("poured_fraction", "passed"), fraction.detail
    assert fraction.metrics["particles"] == MAX_PARTICLES
    assert fraction.metrics["fraction"] >= 0.8
    assert checks_accept(final), [c.detail for c in final]


@pytest.mark.parametrize("speed", [0, -5, 181, "fast", True])
def test_a_flow_speed_that_is_not_a_speed_fails_the_pour_step_by_name(
    prepared: tuple[Path, dict[str, str]], speed: object
) -> None:
    root, relpaths = prepared
    folder = _pour_task(root, relpaths, "bottle-mouth-r015", "cup-r050",
                        params={"flow_speed_deg_s": speed})
    env = TaskEnvironment.from_deployment(folder, settle_steps=50)
    env.reset(0)
    program = env.run_program(None)
    assert not program.completed
    assert program.skills[-1].detail == "params.flow_speed_deg_s must be a number in (0, 180]"


@pytest.mark.parametrize(("robot", "bottle", "seed"), TOO_SMALL)
def test_pour_into_a_too_small_cup_is_rejected(
    prepared: tuple[Path, dict[str, str]], robot: str, bottle: str, seed: int
) -> None:
    root, relpaths = prepared
    env, final = _episode(_pour_task(root, relpaths, bottle, "cup-r020", robot), seed)
    fraction = final[0]
    assert fraction.status == "failed"
    assert fraction.metrics["fraction"] < 0.8
    assert fraction.detail.endswith("needs 80%")
    assert not checks_accept(final)


def test_poured_fraction_is_unavailable_without_particles(tmp_path: Path) -> None:
    from tests.runtime.sim_fixtures import write_deployment

    deployment = write_deployment(tmp_path / "plain", final_checks=[POUR_CHECK])
    env = TaskEnvironment.from_deployment(deployment)
    env.reset(0)
    (result,) = env.run_checks(env.task.checks.final)
    assert result.status == "unavailable"
    assert result.detail == (
        "source 'item' holds no particles (a pour step must name it and its asset must "
        "declare a container_region)"
    )


def test_the_check_spelling_with_source_and_min_parses_to_object_and_params() -> None:
    mapping = task_mapping({"primitive": "box", "size_m": [0.04, 0.04, 0.04]},
                           {"primitive": "box", "size_m": [0.1, 0.1, 0.05]},
                           final_checks=[POUR_CHECK])
    spec = parse_task(mapping, source="task.yaml")
    (check,) = spec.checks.final
    assert (check.check, check.object, check.target, dict(check.params)) == (
        "poured_fraction", "item", "bin", {"min": 0.8}
    )
    both = dict(POUR_CHECK, object="item")
    mapping["checks"]["final"] = [both]
    with pytest.raises(ConfigError) as error:
        parse_task(mapping, source="task.yaml")
    assert str(error.value) == (
        "task.yaml: checks.final[0].source: give either object or source, not both"
    )


def test_segmentation_labels_the_particles_as_their_source(
    prepared: tuple[Path, dict[str, str]],
) -> None:
    import mujoco

    from runtime.sim.cameras.labels import entity_label, segmentation_labels
    from runtime.sim.scene import entity_body_name, particle_body_name

    root, relpaths = prepared
    env = TaskEnvironment.from_deployment(
        _pour_task(root, relpaths, "bottle-mouth-r015", "cup-r050")
    )
    ids = ["item", "bin"]
    bodies = {e: env.model.body(entity_body_name(e)).id for e in ids}
    labels = segmentation_labels(env.model, ids, bodies)
    geom = mujoco.mj_name2id(
        env.model, mujoco.mjtObj.mjOBJ_GEOM, f"{particle_body_name('item', 0)}_geom"
    )
    assert labels.names[labels.geom_label[geom]] == entity_label("item")
