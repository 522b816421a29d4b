"""Fixture deployments for the simulator tests, written in the snapshot layout of INTERFACES.md.

Packages are generated with trimesh: a block, a wide block and an open bin (floor + 4
walls). Collision pieces are the component boxes, and ``.assetcast/snapshot.json``
carries the descriptor, file digests and piece list exactly as the cache writes them.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trimesh
import yaml

from domain.canonical import canonical_json, sha256_json
from runtime.files import file_sha256


def _box(extents: Sequence[float], centre: Sequence[float]) -> trimesh.Trimesh:
    mesh = trimesh.creation.box(extents=list(extents))
    mesh.apply_translation(list(centre))
    return mesh


def _write_mesh(path: Path, mesh: trimesh.Trimesh) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(trimesh.exchange.obj.export_obj(mesh, include_normals=False, digits=8))


def write_package(
    root: Path,
    *,
    descriptor: Mapping[str, Any],
    parts: Sequence[trimesh.Trimesh],
) -> str:
    """Write one prepared snapshot under ``root/assets/<sha>/``; returns the package relpath."""
    staging = root / "assets" / f"staging-{descriptor['asset_id']}"
    staging.mkdir(parents=True)
    visual = trimesh.util.concatenate(list(parts))
    _write_mesh(staging / "mesh.obj", visual)
    _write_mesh(staging / "collision.obj", visual)
    catalog = {
        "descriptor": dict(descriptor),
        "visual_path": "mesh.obj",
        "collision_path": "collision.obj",
    }
    (staging / "asset.catalog.json").write_text(canonical_json(catalog))
    files = {
        name: file_sha256(staging / name)
        for name in ("asset.catalog.json", "collision.obj", "mesh.obj")
    }
    pieces = []
    for index, part in enumerate(parts):
        rel = f".assetcast/collision/piece_{index:03d}.obj"
        _write_mesh(staging / rel, part)
        pieces.append(rel)
    content = sha256_json({"descriptor": dict(descriptor), "files": files})
    snapshot = {
        "schema_version": 1,
        "content_sha256": content,
        "candidate_id": f"fixture:{descriptor['asset_id']}",
        "descriptor": dict(descriptor),
        "visual_path": "mesh.obj",
        "collision_path": "collision.obj",
        "files": files,
        "collision_pieces": pieces,
        "derived_files": {rel: file_sha256(staging / rel) for rel in pieces},
        "source_locator": f"fixture://{descriptor['asset_id']}",
    }
    (staging / ".assetcast" / "snapshot.json").write_text(canonical_json(snapshot))
    final = root / "assets" / content
    if final.exists():
        shutil.rmtree(staging)
    else:
        staging.rename(final)
    return f"assets/{content}/asset.catalog.json"


def block(
    root: Path, asset_id: str, size: Sequence[float], physics: Mapping[str, Any] | None = None
) -> str:
    sx, sy, sz = size
    descriptor: dict[str, Any] = {
        "asset_id": asset_id,
        "category": "block",
        "attributes": {},
        "capabilities": ["antipodal_grasp"],
        "bounds_m": {"lower": [-sx / 2, -sy / 2, 0.0], "upper": [sx / 2, sy / 2, sz]},
        "container_region": None,
        "support_region": None,
        "provenance": {"source": "fixture", "pouring": None},
        "normalized": True,
    }
    if physics is not None:
        descriptor["physics"] = dict(physics)
    return write_package(root, descriptor=descriptor, parts=[_box(size, (0, 0, sz / 2))])


def open_bin(
    root: Path, asset_id: str, size: Sequence[float] = (0.18, 0.14, 0.06), wall: float = 0.006
) -> str:
    sx, sy, sz = size
    parts = [
        _box((sx, sy, wall), (0, 0, wall / 2)),
        _box((wall, sy, sz - wall), (-(sx - wall) / 2, 0, wall + (sz - wall) / 2)),
        _box((wall, sy, sz - wall), ((sx - wall) / 2, 0, wall + (sz - wall) / 2)),
        _box((sx - 2 * wall, wall, sz - wall), (0, -(sy - wall) / 2, wall + (sz - wall) / 2)),
        _box((sx - 2 * wall, wall, sz - wall), (0, (sy - wall) / 2, wall + (sz - wall) / 2)),
    ]
    descriptor = {
        "asset_id": asset_id,
        "category": "bin",
        "attributes": {"open_top": True},
        "capabilities": ["container"],
        "bounds_m": {"lower": [-sx / 2, -sy / 2, 0.0], "upper": [sx / 2, sy / 2, sz]},
        "container_region": {
            "lower": [-sx / 2 + wall, -sy / 2 + wall, wall],
            "upper": [sx / 2 - wall, sy / 2 - wall, sz],
        },
        "support_region": None,
        "provenance": {"source": "fixture", "pouring": None},
        "normalized": True,
    }
    return write_package(root, descriptor=descriptor, parts=parts)


def task_mapping(
    item_asset: Mapping[str, Any],
    bin_asset: Mapping[str, Any],
    *,
    max_opening_m: float = 0.09,
    table_m: Sequence[float] = (0.8, 0.8),
    extra_entities: Sequence[Mapping[str, Any]] = (),
    final_checks: Sequence[Any] | None = None,
    initial_checks: Sequence[Any] | None = None,
    program: Sequence[Mapping[str, Any]] | None = None,
    robot: Mapping[str, Any] | None = None,
    positions: Sequence[Sequence[float]] = ((0.0, -0.15), (0.0, 0.15)),
) -> dict[str, Any]:
    """A task mapping on the gantry (fast) unless ``robot`` names another robot kind."""
    return {
        "task_id": "place_item_in_bin",
        "scene": {
            "table": {"size_m": list(table_m)},
            "robot": dict(robot)
            if robot is not None
            else {"kind": "parallel_gripper", "max_opening_m": max_opening_m},
            "entities": [
                {
                    "entity_id": "item",
                    "position_m": list(positions[0]),
                    "yaw_deg": 0.0,
                    "asset": dict(item_asset),
                },
                {
                    "entity_id": "bin",
                    "position_m": list(positions[1]),
                    "yaw_deg": 0.0,
                    "asset": dict(bin_asset),
                },
                *[dict(e) for e in extra_entities],
            ],
        },
        "program": list(program)
        if program is not None
        else [
            {"skill": "pick", "object": "item"},
            {"skill": "place", "object": "item", "target": "bin", "relation": "fits_inside"},
        ],
        "checks": {
            "initial": list(initial_checks)
            if initial_checks is not None
            else ["at_rest", "upright", "on_table", "no_penetration"],
            "final": list(final_checks)
            if final_checks is not None
            else [
                {"check": "inside_region", "object": "item", "target": "bin"},
                "at_rest",
            ],
        },
        "asset_requirements": {
            "roles": {
                "item": {
                    "entity_id": "item",
                    "query": {"category": "block", "capabilities": ["antipodal_grasp"]},
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
            "category_aliases": {},
        },
    }


def write_deployment(
    directory: Path,
    *,
    item_size: Sequence[float] = (0.04, 0.04, 0.04),
    bin_size: Sequence[float] = (0.18, 0.14, 0.06),
    item_physics: Mapping[str, Any] | None = None,
    **task_kwargs: Any,
) -> Path:
    """A deployment directory: ``task.yaml`` + ``assets/<sha>/`` for the item and the bin."""
    directory.mkdir(parents=True, exist_ok=True)
    item = block(
        directory, f"block-{'x'.join(f'{s:g}' for s in item_size)}", item_size, item_physics
    )
    bin_ = open_bin(directory, f"bin-{'x'.join(f'{s:g}' for s in bin_size)}", bin_size)
    mapping = task_mapping({"package": item}, {"package": bin_}, **task_kwargs)
    (directory / "task.yaml").write_text(yaml.safe_dump(mapping, sort_keys=False))
    return directory
