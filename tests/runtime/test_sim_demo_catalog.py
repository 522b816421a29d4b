"""The simulator on real packages of the procedural demo catalog, prepared by the cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from domain.assets import PreparationContext
from runtime.sim import TaskEnvironment, TrajectoryRecorder, checks_accept, trajectory_bytes
from tests.runtime.sim_fixtures import task_mapping

demo_catalog = pytest.importorskip("runtime.assets.demo_catalog")
cache = pytest.importorskip("runtime.assets.cache")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("demo")
    packages = demo_catalog.write_demo_catalog(root / "catalog")
    context = PreparationContext(cache_dir=str(root / "cache"))
    relpaths = {}
    for package in packages:
        asset = cache.prepare_package(
            package, candidate_id=package.name, locator=str(package), context=context
        )
        relpaths[package.name] = f"cache/{asset.content_sha256}/asset.catalog.json"
    return root, relpaths


def _deploy(root: Path, name: str, relpaths: dict[str, str], item: str, bin_: str) -> Path:
    path = root / f"{name}.yaml"
    mapping = task_mapping({"package": relpaths[item]}, {"package": relpaths[bin_]})
    path.write_text(yaml.safe_dump(mapping, sort_keys=False))
    # TaskEnvironment reads <dir>/task.yaml; a task names only packages inside its folder
    folder = root / name
    folder.mkdir()
    for relpath in (relpaths[item], relpaths[bin_]):
        snapshot = Path(relpath).parent
        if not (folder / snapshot).exists():
            shutil.copytree(root / snapshot, folder / snapshot)
    (folder / "task.yaml").write_text(path.read_text())
    return folder


@pytest.mark.parametrize(
    ("item", "bin_", "program_ok", "inside"),
    [
        ("block-040", "bin-180x140", True, "passed"),  # STL block, floor+walls bin
        ("cylinder-r020-h060", "bin-240x160", True, "passed"),  # PLY cylinder
        ("block-060x040x030", "tray-200x150", True, "failed"),  # taller than the tray
        ("block-110", "bin-240x160", False, "failed"),  # wider than the gripper
    ],
)
def test_demo_catalog_pairs(
    prepared: tuple[Path, dict[str, str]], item: str, bin_: str, program_ok: bool, inside: str
) -> None:
    root, relpaths = prepared
    env = TaskEnvironment.from_deployment(_deploy(root, f"{item}_{bin_}", relpaths, item, bin_))
    env.reset(0)
    assert checks_accept(env.run_checks(env.task.checks.initial))
    program = env.run_program(None)
    assert program.completed is program_ok, program.detail
    final = env.run_checks(env.task.checks.final)
    assert final[0].name == "inside_region" and final[0].status == inside
    assert env.asset_identities()["bin"]["asset_id"] == bin_


def test_place_on_platform_support_region(prepared: tuple[Path, dict[str, str]]) -> None:
    root, relpaths = prepared
    folder = root / "support"
    shutil.copytree(root / "cache", folder / "cache")
    mapping = task_mapping(
        {"package": relpaths["block-040"]},
        {"package": relpaths["platform-200x200"]},
        program=[
            {"skill": "pick", "object": "item"},
            {"skill": "place", "object": "item", "target": "bin", "relation": "supported_by"},
        ],
        final_checks=[
            {"check": "on_region", "object": "item", "target": "bin"},
            "at_rest",
            {"check": "target_upright", "target": "bin"},
            {"check": "inside_region", "object": "item", "target": "bin"},
        ],
    )
    (folder / "task.yaml").write_text(yaml.safe_dump(mapping, sort_keys=False))
    env = TaskEnvironment.from_deployment(folder)
    env.reset(2)
    assert env.run_program(None).completed
    final = env.run_checks(env.task.checks.final)
    assert [c.status for c in final] == ["passed", "passed", "passed", "unavailable"]
    assert final[3].detail == "target 'bin' declares no container_region"
    assert not checks_accept(final)


def _pour_folder(root: Path, name: str, relpaths: dict[str, str], pour: dict) -> Path:
    folder = root / name
    shutil.copytree(root / "cache", folder / "cache")
    mapping = task_mapping(
        {"package": relpaths["bottle-mouth-r015"]},
        {"package": relpaths["cup-r035"]},
        program=[{"skill": "pick", "object": "item"}, pour],
        final_checks=[
            {"check": "target_upright", "target": "bin"},
            "at_rest",
            {"check": "upright", "object": "item"},
            {"check": "on_table", "object": "item"},
        ],
    )
    mapping["asset_requirements"] = {
        "roles": {
            "item": {
                "entity_id": "item",
                "query": {"category": "bottle", "capabilities": ["pour_source"]},
            },
            "bin": {"entity_id": "bin", "query": {"category": "cup"}},
        },
        "relations": [
            {
                "kind": "pours_into",
                "object_role": "item",
                "target_role": "bin",
                "clearance_m": 0.005,
            }
        ],
        "category_aliases": {},
    }
    (folder / "task.yaml").write_text(yaml.safe_dump(mapping, sort_keys=False))
    return folder


def test_pour_bottle_into_cup_is_accepted_and_leaves_the_scene_at_rest(
    prepared: tuple[Path, dict[str, str]],
) -> None:
    root, relpaths = prepared
    folder = _pour_folder(
        root, "pour", relpaths, {"skill": "pour", "object": "item", "target": "bin"}
    )
    env = TaskEnvironment.from_deployment(folder, settle_steps=50)
    payloads = []
    for _ in range(2):
        env.reset(6)
        initial = env.run_checks(env.task.checks.initial)
        assert checks_accept(initial)
        recorder = TrajectoryRecorder.for_environment(env)
        start = env.entity_pose("item")[0]
        program = env.run_program(recorder)
        assert program.completed, program.detail
        assert "put back at" in program.skills[1].detail
        final = env.run_checks(env.task.checks.final)
        assert [(c.name, c.status) for c in final] == [
            ("target_upright", "passed"),
            ("at_rest", "passed"),
            ("upright", "passed"),
            ("on_table", "passed"),
        ]
        assert final[1].metrics["linear_m_s"] < 0.02 and final[1].metrics["angular_rad_s"] < 0.3
        assert env.held is None
        # set down upright where it was picked up
        assert np.linalg.norm(env.entity_pose("item")[0][:2] - start[:2]) < 0.01
        payloads.append(trajectory_bytes(recorder.to_payload({"seed": 6})))
    assert payloads[0] == payloads[1]  # deterministic


def test_pour_without_put_back_keeps_holding_and_still_ends_settled(
    prepared: tuple[Path, dict[str, str]],
) -> None:
    root, relpaths = prepared
    pour = {"skill": "pour", "object": "item", "target": "bin", "params": {"put_back": False}}
    env = TaskEnvironment.from_deployment(_pour_folder(root, "pour_hold", relpaths, pour))
    env.reset(1)
    program = env.run_program(None)
    assert program.completed, program.detail
    assert env.held == "item"
    final = env.run_checks(env.task.checks.final)
    assert [(c.name, c.status) for c in final[:2]] == [
        ("target_upright", "passed"),
        ("at_rest", "passed"),
    ]
    assert final[3].status == "failed"  # still in the air, above the cup
