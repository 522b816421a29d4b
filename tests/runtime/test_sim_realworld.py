"""Meshes like a new user brings them: a noisy open scan, a one-piece mug, a GLB scene.

Each package is generated with trimesh (normalized: metres, +Z up, bottom centre at the
origin, ``bounds_m`` equal to the mesh bounds), prepared by the real cache and run
through pick + place in the simulator. The bar is robustness: no crash, a finite positive
mass, and a bounded episode (step counts, not wall time).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import trimesh
import yaml

from domain.assets import PreparationContext
from runtime.assets.cache import prepare_package
from runtime.sim import TaskEnvironment, checks_accept
from runtime.sim.environment import SETTLE_MAX_INTERVALS
from tests.runtime.sim_fixtures import task_mapping

MAX_EPISODE_STEPS = 20_000  # 40 s of simulated time: far above a normal pick + place


def _normalize(mesh: trimesh.Trimesh) -> trimesh.Trimesh:
    lo, hi = mesh.bounds
    mesh.apply_translation([-(lo[0] + hi[0]) / 2, -(lo[1] + hi[1]) / 2, -lo[2]])
    return mesh


def _scan(radius: float, height: float) -> trimesh.Trimesh:
    """~50k faces, vertex noise, holes: a hand-held scan of a small can, not watertight."""
    mesh = trimesh.creation.cylinder(radius=radius, height=height, sections=64)
    while len(mesh.faces) < 40_000:
        mesh = mesh.subdivide()
    rng = np.random.default_rng(1234)
    vertices = mesh.vertices + rng.normal(0.0, 0.0004, size=mesh.vertices.shape)
    keep = rng.random(len(mesh.faces)) > 0.01  # ~1% of faces missing
    faces = mesh.faces[keep]
    # scanner debris: a few stray, flat triangles floating next to the surface
    specks = []
    for k in range(4):
        corner = np.array([radius * 1.05, 0.0, -height / 2 + (k + 1) * height / 5])
        specks.append(corner + rng.normal(0.0, 0.001, size=(3, 3)) * [1, 1, 0])
    base = len(vertices)
    vertices = np.concatenate([vertices, *specks])
    faces = np.concatenate([faces, base + np.arange(12).reshape(4, 3)])
    scan = trimesh.Trimesh(vertices, faces, process=False)
    assert not scan.is_watertight and len(scan.faces) > 40_000
    return _normalize(scan)


def _mug(radius: float, height: float, wall: float) -> trimesh.Trimesh:
    """Open-topped cup with a handle, exported as one mesh (no separate collision file)."""
    outer = trimesh.creation.cylinder(radius=radius, height=height, sections=48)
    top = outer.bounds[1][2]
    up = (outer.face_normals[:, 2] > 0.99) & (np.abs(outer.triangles_center[:, 2] - top) < 1e-9)
    cup = trimesh.Trimesh(outer.vertices, outer.faces[~up], process=True)
    handle = trimesh.creation.torus(
        major_radius=height / 3, minor_radius=wall, major_sections=24, minor_sections=8
    )
    handle.apply_transform(trimesh.transformations.rotation_matrix(math.pi / 2, [1, 0, 0]))
    handle.apply_translation([radius, 0.0, 0.0])
    mug = trimesh.util.concatenate([cup, handle])
    return _normalize(mug)


def _write_package(
    folder: Path, asset_id: str, category: str, mesh_file: str, data: bytes, **extra: object
) -> Path:
    folder.mkdir(parents=True)
    (folder / mesh_file).write_bytes(data)
    loaded = trimesh.load(str(folder / mesh_file), force="mesh", process=False)
    lo, hi = (v.tolist() for v in loaded.bounds)
    descriptor = {
        "asset_id": asset_id,
        "category": category,
        "attributes": extra.pop("attributes", {}),
        "capabilities": extra.pop("capabilities"),
        "bounds_m": {"lower": lo, "upper": hi},
        "container_region": None,
        "support_region": None,
        "provenance": {"source": "test-realworld", "pouring": None},
        "normalized": True,
    }
    region = extra.pop("container_inset", None)
    if region is not None:
        half, floor = region
        descriptor["container_region"] = {
            "lower": [-half, -half, lo[2] + floor],
            "upper": [half, half, hi[2]],
        }
    manifest = {"descriptor": descriptor, "visual_path": mesh_file, "collision_path": None}
    (folder / "asset.catalog.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return folder


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("realworld")
    catalog = root / "catalog"
    scan = _scan(0.016, 0.05)
    glb_block = trimesh.creation.box(extents=[0.035, 0.03, 0.04])
    glb_block.apply_translation([0.0, 0.0, 0.02])
    glb_scene = trimesh.Scene()
    glb_scene.add_geometry(glb_block, node_name="block", geom_name="block")
    mug_radius, wall = 0.042, 0.003
    inscribed = (mug_radius - wall) / math.sqrt(2) - 0.001
    made = {
        "scan": _write_package(
            catalog / "scan", "scan-can", "block", "scan.ply",
            trimesh.exchange.ply.export_ply(scan, encoding="binary"),
            capabilities=["antipodal_grasp"],
        ),
        "glb": _write_package(
            catalog / "glb", "glb-block", "block", "model.glb",
            glb_scene.export(file_type="glb"), capabilities=["antipodal_grasp"],
        ),
        "mug": _write_package(
            catalog / "mug", "mug-handle", "bin", "mug.obj",
            trimesh.exchange.obj.export_obj(_mug(mug_radius, 0.09, wall)).encode(),
            capabilities=["container"], attributes={"open_top": True},
            container_inset=(inscribed, 0.004),
        ),
    }
    context = PreparationContext(cache_dir=str(root / "cache"))
    relpaths = {}
    for name, folder in made.items():
        asset = prepare_package(folder, candidate_id=name, locator=str(folder), context=context)
        relpaths[name] = f"cache/{asset.content_sha256}/asset.catalog.json"
    return root, relpaths


def _deployment(
    root: Path, relpaths: dict[str, str], item: str, container: str, robot: dict | None = None
) -> Path:
    folder = root / f"deploy-{item}-{container}-{(robot or {}).get('kind', 'gantry')}"
    folder.mkdir()
    for name in (item, container):  # a task names only packages inside its folder
        snapshot = Path(relpaths[name]).parent
        shutil.copytree(root / snapshot, folder / snapshot)
    mapping = task_mapping(
        {"package": relpaths[item]}, {"package": relpaths[container]}, robot=robot
    )
    (folder / "task.yaml").write_text(yaml.safe_dump(mapping, sort_keys=False))
    return folder


@pytest.mark.parametrize("item", ["scan", "glb"])
def test_user_meshes_pick_and_place_into_a_one_piece_mug(
    packages: tuple[Path, dict[str, str]], item: str
) -> None:
    root, relpaths = packages
    env = TaskEnvironment.from_deployment(_deployment(root, relpaths, item, "mug"), settle_steps=50)
    for eid in ("item", "bin"):
        mass = float(env.model.body_mass[env.model.body(f"entity_{eid}").id])
        assert math.isfinite(mass) and mass > 0.0, (eid, mass)
        assert 1e-3 < env.geometries[eid].mass < 1.0
    # MuJoCo limits: every hull it received is small enough to collide quickly
    assert all(len(p.faces) <= 2000 for g in env.geometries.values() for p in g.pieces)
    env.reset(3)
    initial = env.run_checks(env.task.checks.initial)
    assert checks_accept(initial), [c.to_dict() for c in initial]
    program = env.run_program(None)
    assert program.completed, program.detail
    assert 0 < program.steps <= MAX_EPISODE_STEPS
    assert all(s.steps <= MAX_EPISODE_STEPS // 2 for s in program.skills)
    assert SETTLE_MAX_INTERVALS * 10 < MAX_EPISODE_STEPS
    final = env.run_checks(env.task.checks.final)
    assert [(c.name, c.status) for c in final] == [
        ("inside_region", "passed"),
        ("at_rest", "passed"),
    ], [c.detail for c in final]
    env.close()


@pytest.mark.parametrize("item", ["scan", "glb"])
def test_user_meshes_pick_and_place_into_the_mug_on_the_arm(
    packages: tuple[Path, dict[str, str]], item: str
) -> None:
    root, relpaths = packages
    folder = _deployment(root, relpaths, item, "mug", robot={"kind": "franka_panda"})
    env = TaskEnvironment.from_deployment(folder, settle_steps=50)
    env.reset(3)
    assert checks_accept(env.run_checks(env.task.checks.initial))
    program = env.run_program(None)
    assert program.completed, program.detail
    final = env.run_checks(env.task.checks.final)
    assert [(c.name, c.status) for c in final] == [
        ("inside_region", "passed"),
        ("at_rest", "passed"),
    ], [c.detail for c in final]
    env.close()
