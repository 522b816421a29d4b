"""parse_task / task_to_dict: strict paths for bad input, cross references, round trip."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from domain.errors import ConfigError
from domain.task import (
    CheckSpec,
    PackageAsset,
    PhysicsSpec,
    PrimitiveAsset,
    parse_task,
    task_to_dict,
)

SOURCE = "tasks/t.yaml"


def base() -> dict[str, Any]:
    return {
        "task_id": "place_item_in_bin",
        "scene": {
            "table": {"size_m": [0.8, 0.8]},
            "robot": {"kind": "parallel_gripper", "max_opening_m": 0.09},
            "entities": [
                {
                    "entity_id": "item",
                    "position_m": [0.0, -0.15],
                    "yaw_deg": 0,
                    "asset": {"primitive": "box", "size_m": [0.04, 0.04, 0.04]},
                },
                {
                    "entity_id": "bin",
                    "position_m": [0.0, 0.15],
                    "asset": {"package": "assets/abc/asset.catalog.json"},
                },
            ],
        },
        "program": [
            {"skill": "pick", "object": "item"},
            {"skill": "place", "object": "item", "target": "bin", "relation": "fits_inside"},
        ],
        "checks": {
            "initial": ["at_rest", "upright"],
            "final": [{"check": "inside_region", "object": "item", "target": "bin"}, "at_rest"],
        },
        "asset_requirements": {
            "roles": {
                "item": {
                    "entity_id": "item",
                    "query": {"category": "block", "capabilities": ["antipodal_grasp"]},
                    "max_extent_m": 0.08,
                },
                "bin": {
                    "entity_id": "bin",
                    "query": {
                        "category": "bin",
                        "attributes": {"open_top": True},
                        "capabilities": ["container"],
                    },
                },
            },
            "relations": [
                {
                    "kind": "fits_inside",
                    "object_role": "item",
                    "target_role": "bin",
                    "clearance_m": 0.005,
                }
            ],
            "category_aliases": {"cube": "block"},
        },
    }


def test_parses_the_design_example() -> None:
    spec = parse_task(base(), source=SOURCE)
    assert spec.task_id == "place_item_in_bin"
    assert spec.entity("item").asset == PrimitiveAsset("box", (0.04, 0.04, 0.04))
    assert spec.entity("bin").asset == PackageAsset("assets/abc/asset.catalog.json")
    assert spec.entity("bin").yaw_deg == 0.0
    assert spec.scene.physics == PhysicsSpec()
    assert spec.checks.initial[0] == CheckSpec("at_rest")
    assert spec.checks.final[1] == CheckSpec("at_rest")
    assert spec.checks.final[0] == CheckSpec("inside_region", "item", "bin")
    assert spec.role_entities() == {"bin": "bin", "item": "item"}
    assert spec.program[1].relation == "fits_inside"
    with pytest.raises(KeyError):
        spec.entity("nope")


def test_round_trip_is_exact() -> None:
    raw = base()
    raw["program"][0]["params"] = {"approach_m": 0.1, "tags": ["a", 1, True, None]}
    raw["checks"]["final"].append({"check": "upright", "object": "item", "params": {"tol": 5}})
    raw["scene"]["physics"] = {"timestep_s": 0.001}
    spec = parse_task(raw)
    again = task_to_dict(spec)
    assert parse_task(again) == spec
    assert task_to_dict(parse_task(again)) == again
    # the string form of a bare check is preserved
    assert again["checks"]["initial"] == ["at_rest", "upright"]


def test_without_requirements() -> None:
    raw = base()
    del raw["asset_requirements"]
    spec = parse_task(raw)
    assert spec.asset_requirements is None
    assert spec.role_entities() == {}
    assert "asset_requirements" not in task_to_dict(spec)


def mutate(path: list[Any], value: Any, *, delete: bool = False) -> dict[str, Any]:
    raw = copy.deepcopy(base())
    node = raw
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return raw


BAD = [
    (["scene", "entities", 1, "yaw"], 3, r"scene\.entities\[1\]\.yaw: unknown key$"),
    (["surprise"], 1, r"surprise: unknown key$"),
    (
        ["scene", "entities", 0, "yaw_deg"],
        "90",
        r"scene\.entities\[0\]\.yaw_deg: expected a number, got str$",
    ),
    (
        ["scene", "entities", 0, "yaw_deg"],
        True,
        r"scene\.entities\[0\]\.yaw_deg: expected a number, got bool$",
    ),
    (
        ["scene", "entities", 0, "yaw_deg"],
        float("nan"),
        r"scene\.entities\[0\]\.yaw_deg: must be finite$",
    ),
    (
        ["scene", "entities", 0, "position_m"],
        [0.0],
        r"scene\.entities\[0\]\.position_m: expected 2 numbers, got 1$",
    ),
    (
        ["scene", "entities", 0, "asset", "size_m"],
        [0.1, 0.1],
        r"scene\.entities\[0\]\.asset\.size_m: expected 3 numbers, got 2$",
    ),
    (
        ["scene", "entities", 0, "asset", "size_m"],
        [0.1, 0.0, 0.1],
        r"scene\.entities\[0\]\.asset\.size_m\[1\]: must be > 0, got 0\.0$",
    ),
    (
        ["scene", "entities", 0, "asset", "primitive"],
        "cone",
        r"scene\.entities\[0\]\.asset\.primitive: unknown primitive 'cone'",
    ),
    (
        ["scene", "entities", 1, "asset", "package"],
        "/abs/asset.catalog.json",
        r"scene\.entities\[1\]\.asset\.package: must be a path relative to the task file$",
    ),
    (
        ["scene", "entities", 1, "entity_id"],
        "item",
        r"scene\.entities\[1\]\.entity_id: duplicate entity id 'item'$",
    ),
    (
        ["scene", "entities", 1, "asset"],
        None,
        r"scene\.entities\[1\]\.asset: expected a mapping, got null$",
    ),
    (["scene", "entities"], [], r"scene\.entities: at least one entity is required$"),
    (["scene", "robot", "kind"], "suction", r"scene\.robot\.kind: unknown robot kind 'suction'"),
    (
        ["scene", "robot", "max_opening_m"],
        0,
        r"scene\.robot\.max_opening_m: must be > 0, got 0\.0$",
    ),
    (
        ["scene", "robot", "max_opening_m"],
        float("inf"),
        r"scene\.robot\.max_opening_m: must be finite$",
    ),
    (["scene", "table"], None, r"scene\.table: expected a mapping, got null$"),
    (["scene", "physics"], {"timestep": 0.1}, r"scene\.physics\.timestep: unknown key$"),
    (["scene", "physics"], {"pose_noise_m": -1}, r"scene\.physics\.pose_noise_m: must be >= 0"),
    (["task_id"], "", r"task_id: must be a non-empty string"),
    (["task_id"], 5, r"task_id: expected a string, got int$"),
    (["program"], [], r"program: at least one skill step is required$"),
    (["program", 0, "object"], "ghost", r"program\[0\]\.object: unknown entity 'ghost'$"),
    (["program", 1, "target"], "ghost", r"program\[1\]\.target: unknown entity 'ghost'$"),
    (["program", 1, "relation"], "near", r"program\[1\]\.relation: unknown relation 'near'"),
    (["program", 0, "params"], [1], r"program\[0\]\.params: expected a mapping, got list$"),
    (
        ["checks", "final", 0, "target"],
        "ghost",
        r"checks\.final\[0\]\.target: unknown entity 'ghost'$",
    ),
    (["checks", "final", 0, "where"], "x", r"checks\.final\[0\]\.where: unknown key$"),
    (["checks", "initial", 1], 7, r"checks\.initial\[1\]: expected a mapping, got int$"),
    (["checks", "initial"], [], r"checks\.initial: at least one check is required"),
    (["checks", "final"], None, r"checks\.final: expected a list, got null$"),
    (
        ["asset_requirements", "roles", "bin", "query", "capabilities"],
        "container",
        r"asset_requirements\.roles\.bin\.query\.capabilities: expected a list, got str$",
    ),
    (
        ["asset_requirements", "roles", "bin", "query", "colour"],
        "red",
        r"asset_requirements\.roles\.bin\.query\.colour: unknown key$",
    ),
    (
        ["asset_requirements", "roles", "bin", "query", "attributes"],
        {"open_top": None},
        r"asset_requirements\.roles\.bin\.query\.attributes\.open_top: "
        r"expected a string, number or bool, got null$",
    ),
    (
        ["asset_requirements", "roles", "bin", "entity_id"],
        "ghost",
        r"asset_requirements\.roles\.bin\.entity_id: unknown entity 'ghost'$",
    ),
    (
        ["asset_requirements", "roles", "bin", "entity_id"],
        "item",
        r"asset_requirements\.roles\.(bin|item)\.entity_id: entity 'item' is already bound to role",
    ),
    (
        ["asset_requirements", "roles", "item", "max_extent_m"],
        -0.1,
        r"asset_requirements\.roles\.item\.max_extent_m: must be > 0",
    ),
    (
        ["asset_requirements", "relations", 0, "clearance_m"],
        -0.001,
        r"asset_requirements\.relations\[0\]\.clearance_m: must be >= 0",
    ),
    (
        ["asset_requirements", "relations", 0, "clearance_m"],
        float("nan"),
        r"asset_requirements\.relations\[0\]\.clearance_m: must be finite$",
    ),
    (
        ["asset_requirements", "relations", 0, "kind"],
        "touches",
        r"asset_requirements\.relations\[0\]\.kind: unknown relation 'touches'",
    ),
    (
        ["asset_requirements", "relations", 0, "target_role"],
        "item",
        r"asset_requirements\.relations\[0\]\.target_role: must differ from object_role$",
    ),
    (
        ["asset_requirements", "relations", 0, "target_role"],
        "lid",
        r"asset_requirements\.relations\[0\]\.target_role: unknown role 'lid'$",
    ),
    (
        ["asset_requirements", "category_aliases"],
        {"a": "b", "b": "a"},
        r"asset_requirements\.category_aliases\.a: alias cycle: a -> b -> a$",
    ),
    (
        ["asset_requirements", "roles"],
        {},
        r"asset_requirements\.roles: at least one role is required$",
    ),
]


@pytest.mark.parametrize(("path", "value", "message"), BAD, ids=[m for _, _, m in BAD])
def test_bad_input_names_the_path(path: list[Any], value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^tasks/t\.yaml: {message}"):
        parse_task(mutate(path, value), source=SOURCE)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (["scene", "robot"], r"scene\.robot: required key is missing$"),
        (
            ["scene", "entities", 0, "asset"],
            r"scene\.entities\[0\]\.asset: required key is missing$",
        ),
        (["checks", "final"], r"checks\.final: required key is missing$"),
        (
            ["asset_requirements", "roles", "item", "query"],
            r"asset_requirements\.roles\.item\.query: required key is missing$",
        ),
    ],
)
def test_missing_keys_are_named(path: list[Any], message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^tasks/t\.yaml: {message}"):
        parse_task(mutate(path, None, delete=True), source=SOURCE)


def test_non_mapping_document() -> None:
    with pytest.raises(ConfigError, match=r"^t\.yaml: expected a mapping, got list$"):
        parse_task([1], source="t.yaml")


def test_error_carries_path_and_source() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_task(mutate(["scene", "entities", 1, "yaw"], 1), source=SOURCE)
    assert caught.value.path == "scene.entities[1].yaw"
    assert caught.value.source == SOURCE
