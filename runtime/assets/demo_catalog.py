"""The built-in procedural catalog: small, varied, byte-deterministic packages.

It exists so a fresh checkout can run a whole collection with no downloads. Sizes
are chosen so that some role combinations satisfy ``fits_inside``,
``supported_by`` and ``pours_into`` and others do not (e.g. an 11 cm block fits no
gripper and few bins; a wide-mouthed bottle cannot pour into a narrow cup), which
exercises both acceptance and every rejection path of the matcher.

Most packages are OBJ; one each is STL, PLY and GLB, and one OBJ references an
MTL file, so every loader and reference path runs on real data. Containers come
in both collision styles: bins are separate floor/wall boxes (their convex pieces
are the parts), trays and cups are one connected open surface (their collision is
carved from ``container_region``).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import trimesh

from domain.assets import PreparationContext
from domain.errors import AssetcastInputError, AssetValidationError
from domain.limits import MeshLimits
from runtime.assets.cache import prepare_package
from runtime.assets.mesh_writers import glb_bytes, obj_bytes, ply_bytes, stl_bytes
from runtime.assets.package import MANIFEST_NAME
from runtime.assets.package_warnings import package_warnings
from runtime.assets.providers import DirectoryAssetProvider

GENERATOR = "assetcast.demo_catalog/1"
SECTIONS = 24
_WRITERS: dict[str, Callable[[np.ndarray, np.ndarray], bytes]] = {
    "obj": obj_bytes, "stl": stl_bytes, "ply": ply_bytes, "glb": glb_bytes,
}
_FLOAT32 = {"stl", "ply", "glb"}


@dataclass(frozen=True)
class CatalogCheck:
    """One line of ``assetcast catalog check``: a package and whether it prepared."""

    path: str
    ok: bool
    reason: str
    warnings: tuple[str, ...] = ()


@dataclass
class _Spec:
    asset_id: str
    category: str
    mesh: trimesh.Trimesh
    capabilities: list[str]
    attributes: dict[str, Any] = field(default_factory=dict)
    container_inset: tuple[float, float] | None = None  # (side wall, floor) thickness
    support_inset: float | None = None
    # A pour source's cavity: a square shaft of this half-width from a 5 mm floor to the
    # top (the collision is carved around it, so the particles it holds pour out of it).
    cavity_half_m: float | None = None
    pouring: dict[str, Any] | None = None
    fmt: str = "obj"
    material: bool = False


Vec3 = tuple[float, float, float]


def _box(extents: Vec3, centre: Vec3) -> trimesh.Trimesh:
    return trimesh.creation.box(
        extents=extents, transform=trimesh.transformations.translation_matrix(centre)
    )


def _standing_box(x: float, y: float, z: float) -> trimesh.Trimesh:
    return _box((x, y, z), (0.0, 0.0, z / 2))


def _standing_cylinder(radius: float, height: float, base: float = 0.0) -> trimesh.Trimesh:
    mesh = trimesh.creation.cylinder(radius=radius, height=height, sections=SECTIONS)
    mesh.apply_translation([0.0, 0.0, base + height / 2])
    return mesh


def _bin(x: float, y: float, z: float, wall: float) -> trimesh.Trimesh:
    """Floor and four walls as separate, overlapping boxes (no shared edges, so a
    connected-component split recovers each part and the interior stays open)."""
    hx, hy, half = x / 2, y / 2, wall / 2
    parts = [
        _box((x - wall, y - wall, wall), (0, 0, wall / 2)),  # floor, tucked into the walls
        _box((wall, y, z), (-hx + half, 0, z / 2)),
        _box((wall, y, z), (hx - half, 0, z / 2)),
        _box((x - wall, wall, z), (0, -hy + half, z / 2)),
        _box((x - wall, wall, z), (0, hy - half, z / 2)),
    ]
    return trimesh.util.concatenate(parts)


def _open_surface(mesh: trimesh.Trimesh) -> trimesh.Trimesh:
    """Remove the upward-facing top cap: one connected, open, zero-thickness container."""
    top = mesh.bounds[1][2]
    centroids = mesh.triangles_center
    keep = ~((mesh.face_normals[:, 2] > 0.99) & (np.abs(centroids[:, 2] - top) < 1e-12))
    return trimesh.Trimesh(mesh.vertices, mesh.faces[keep], process=True)


def _bottle(body_r: float, body_h: float, neck_r: float, neck_h: float) -> trimesh.Trimesh:
    return trimesh.util.concatenate(
        [_standing_cylinder(body_r, body_h), _standing_cylinder(neck_r, neck_h, base=body_h)]
    )


def _specs() -> list[_Spec]:
    grasp = ["antipodal_grasp"]
    specs = [
        _Spec("block-030", "block", _standing_box(0.03, 0.03, 0.03), grasp, material=True),
        _Spec("block-040", "block", _standing_box(0.04, 0.04, 0.04), grasp, fmt="stl"),
        _Spec("block-050", "block", _standing_box(0.05, 0.05, 0.05), grasp),
        _Spec("block-060x040x030", "block", _standing_box(0.06, 0.04, 0.03), grasp),
        # 5 mm per side in bin-080x080: the matcher admits it, but the gripper's fingers do
        # not fit between tile and walls, so physics decides (the fingers catch the bin).
        _Spec("block-060x060x030", "block", _standing_box(0.06, 0.06, 0.03), grasp),
        _Spec("block-110", "block", _standing_box(0.11, 0.11, 0.04), grasp),
        _Spec("cylinder-r015-h050", "cylinder", _standing_cylinder(0.015, 0.05), grasp),
        _Spec("cylinder-r020-h060", "cylinder", _standing_cylinder(0.02, 0.06), grasp, fmt="ply"),
        _Spec("cylinder-r030-h040", "cylinder", _standing_cylinder(0.03, 0.04), grasp),
        _Spec("cylinder-r055-h050", "cylinder", _standing_cylinder(0.055, 0.05), grasp),
    ]
    for x, y, z, fmt in (
        (0.08, 0.08, 0.05, "obj"), (0.12, 0.10, 0.05, "glb"),
        (0.18, 0.14, 0.06, "obj"), (0.24, 0.16, 0.08, "obj"),
    ):
        specs.append(
            _Spec(
                f"bin-{round(x * 1000):03d}x{round(y * 1000):03d}", "bin", _bin(x, y, z, 0.005),
                ["container"], {"open_top": True}, container_inset=(0.005, 0.005), fmt=fmt,
            )
        )
    for x, y, z in ((0.14, 0.10, 0.025), (0.20, 0.15, 0.02), (0.30, 0.20, 0.03)):
        specs.append(
            _Spec(
                f"tray-{round(x * 1000):03d}x{round(y * 1000):03d}", "tray",
                _open_surface(_standing_box(x, y, z)), ["container"], {"open_top": True},
                container_inset=(0.003, 0.003),
            )
        )
    platforms = ((0.06, 0.06, 0.04), (0.10, 0.10, 0.03), (0.20, 0.20, 0.02), (0.30, 0.15, 0.015))
    for x, y, z in platforms:
        specs.append(
            _Spec(
                f"platform-{round(x * 1000):03d}x{round(y * 1000):03d}", "platform",
                _standing_box(x, y, z), ["support_surface"], support_inset=0.005,
            )
        )
    for body_r, mouth_r in ((0.03, 0.01), (0.035, 0.015), (0.04, 0.025)):
        specs.append(
            _Spec(
                f"bottle-mouth-r{round(mouth_r * 1000):03d}", "bottle",
                _bottle(body_r, 0.12, mouth_r, 0.04), ["pour_source", "antipodal_grasp"],
                cavity_half_m=mouth_r,
                pouring={
                    "mouth_radius_m": mouth_r, "opening_radius_m": None,
                    "evidence": "procedural: radius of the generated neck cylinder",
                },
            )
        )
    for radius, height in ((0.02, 0.08), (0.035, 0.09), (0.05, 0.07)):
        specs.append(
            _Spec(
                f"cup-r{round(radius * 1000):03d}", "cup",
                _open_surface(_standing_cylinder(radius, height)), ["container"],
                {"open_top": True}, container_inset=(0.002, 0.003),
                pouring={
                    "mouth_radius_m": None, "opening_radius_m": radius,
                    "evidence": "procedural: radius of the generated cup wall",
                },
            )
        )
    return specs


def _box_dict(lower: list[float], upper: list[float]) -> dict[str, list[float]]:
    return {"lower": lower, "upper": upper}


def _package_files(spec: _Spec) -> dict[str, bytes]:
    vertices = np.asarray(spec.mesh.vertices, dtype=np.float64)
    if spec.fmt in _FLOAT32:
        vertices = vertices.astype(np.float32).astype(np.float64)
    lower = [float(v) for v in vertices.min(axis=0)]
    upper = [float(v) for v in vertices.max(axis=0)]
    mesh_name = f"mesh.{spec.fmt}"
    files: dict[str, bytes] = {}
    mesh_data = _WRITERS[spec.fmt](vertices, spec.mesh.faces)
    if spec.material:
        files["mesh.mtl"] = b"newmtl demo\nKd 0.8 0.3 0.2\n"
        mesh_data = b"mtllib mesh.mtl\nusemtl demo\n" + mesh_data
    files[mesh_name] = mesh_data
    container = support = None
    if spec.container_inset is not None:
        wall, floor = spec.container_inset
        container = _box_dict(
            [lower[0] + wall, lower[1] + wall, lower[2] + floor],
            [upper[0] - wall, upper[1] - wall, upper[2]],
        )
    if spec.cavity_half_m is not None:
        half = spec.cavity_half_m
        container = _box_dict([-half, -half, lower[2] + 0.005], [half, half, upper[2]])
    if spec.support_inset is not None:
        m = spec.support_inset
        support = _box_dict(
            [lower[0] + m, lower[1] + m, upper[2]], [upper[0] - m, upper[1] - m, upper[2]]
        )
    descriptor = {
        "asset_id": spec.asset_id,
        "category": spec.category,
        "attributes": spec.attributes,
        "capabilities": spec.capabilities,
        "bounds_m": _box_dict(lower, upper),
        "container_region": container,
        "support_region": support,
        "provenance": {"source": "procedural", "generator": GENERATOR, "pouring": spec.pouring},
        "normalized": True,
    }
    manifest = {"descriptor": descriptor, "visual_path": mesh_name, "collision_path": None}
    files[MANIFEST_NAME] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    return files


def write_demo_catalog(directory: str | Path) -> list[Path]:
    """Write every demo package below ``directory``; return the package folders, sorted.

    Re-writing into an existing catalog is a no-op when the bytes are identical;
    a package folder holding anything else is refused rather than overwritten.
    """
    root = Path(directory).absolute()
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for spec in _specs():
        package = root / spec.asset_id
        files = _package_files(spec)
        if package.exists():
            existing = sorted(p.relative_to(package).as_posix() for p in package.rglob("*"))
            same = existing == sorted(files) and all(
                (package / rel).read_bytes() == data for rel, data in files.items()
            )
            if not same:
                raise AssetValidationError(f"{package}: already exists with different content")
        else:
            package.mkdir()
            for rel, data in sorted(files.items()):
                (package / rel).write_bytes(data)
        written.append(package)
    return sorted(written)


def check_catalog(
    directory: str | Path, *, limits: MeshLimits | None = None
) -> list[CatalogCheck]:
    """Prepare every package below ``directory`` into a throwaway cache; one result each."""
    provider = DirectoryAssetProvider(directory)
    packages = provider.package_dirs()
    if not packages:
        raise AssetValidationError(f"{provider.root}: no asset packages found")
    results = []
    with tempfile.TemporaryDirectory(prefix="assetcast-check-") as cache:
        context = PreparationContext(cache_dir=cache, limits=limits or MeshLimits())
        for package in packages:
            try:
                asset = prepare_package(
                    package, candidate_id=package.name, locator=str(package), context=context
                )
            except AssetcastInputError as exc:
                results.append(CatalogCheck(str(package), False, str(exc)))
                continue
            reason = (
                f"{asset.asset_id} {asset.content_sha256[:12]} "
                f"{len(asset.collision_pieces)} collision pieces"
            )
            results.append(
                CatalogCheck(str(package), True, reason, tuple(package_warnings(asset)))
            )
    return results
