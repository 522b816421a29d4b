"""The simulator on real packages of the procedural demo catalog, prepared by the cache."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from domain.assets import PreparationContext
from runtime.sim import TaskEnvironment, checks_accept
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
    # TaskEnvironment reads <dir>/task.yaml; keep one task file per directory
    folder = root / name
    folder.mkdir()
    (folder / "task.yaml").write_text(
        path.read_text().replace("package: cache/", "package: ../cache/")
    )
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
    folder.mkdir()
    mapping = task_mapping(
        {"package": "../" + relpaths["block-040"]},
        {"package": "../" + relpaths["platform-200x200"]},
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
