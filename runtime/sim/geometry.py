"""Load the collision geometry of one scene entity from a deployment.

A package entity is read from its prepared snapshot (``.assetcast/snapshot.json``):
every convex collision piece becomes one MuJoCo mesh geom, and the body mass is the
descriptor's ``physics.mass_kg``, else the mesh volume times its ``physics.density_kg_m3`` or
the task density; ``physics.friction`` overrides the default contact friction. Reading the
snapshot JSON directly (instead of the cache module) keeps the simulator usable on any
deployment directory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import structlog
import trimesh

from domain.asset_physics import AssetPhysics
from domain.errors import AssetValidationError
from runtime.inputs.json_text import load_json_strict
from runtime.inputs.paths import resolve_inside
from runtime.inputs.reading import read_bounded
from runtime.sim.contact import OBJECT_FRICTION
from runtime.sim.errors import SceneBuildError
from runtime.sim.mesh_memo import derived

log = structlog.get_logger(__name__)

_CYLINDER_SEGMENTS = 16
MAX_JSON_BYTES = 8 << 20  # snapshot.json / asset.catalog.json of one package


@dataclass(frozen=True)
class MeshPiece:
    """One convex collision piece in the package frame (metres, +Z up)."""

    vertices: np.ndarray  # (n, 3) float64
    faces: np.ndarray  # (m, 3) int32
    volume: float


@dataclass(frozen=True)
class EntityGeometry:
    """Everything the scene builder and the checks need to know about an entity's shape."""

    entity_id: str
    primitive: tuple[str, tuple[float, ...]] | None
    pieces: tuple[MeshPiece, ...]
    points: np.ndarray  # local points whose hull bounds the shape (for AABBs)
    mass: float
    descriptor: Mapping[str, Any] | None
    content_sha256: str | None
    asset_id: str | None
    identity: tuple[Any, ...]  # compared when deciding that two entities are "the same"
    visual_path: Path | None = None  # the package's visual mesh (what cameras show)
    friction: tuple[float, float, float] = OBJECT_FRICTION  # sliding, torsional, rolling

    @property
    def local_lower(self) -> np.ndarray:
        return self.points.min(axis=0)

    @property
    def local_upper(self) -> np.ndarray:
        return self.points.max(axis=0)

    def region(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """A descriptor region (``container_region``/``support_region``) in the entity frame."""
        if self.descriptor is None:
            return None
        value = self.descriptor.get(name)
        if not value:
            return None
        return np.asarray(value["lower"], dtype=float), np.asarray(value["upper"], dtype=float)


def _primitive_points(kind: str, size: tuple[float, ...]) -> tuple[np.ndarray, float]:
    if kind == "box":
        sx, sy, sz = size
        corners = np.array(
            [[x, y, z] for x in (-sx / 2, sx / 2) for y in (-sy / 2, sy / 2) for z in (0.0, sz)]
        )
        return corners, sx * sy * sz
    if kind == "cylinder":
        radius, height = size
        angles = np.linspace(0.0, 2 * math.pi, _CYLINDER_SEGMENTS, endpoint=False)
        ring = np.stack([radius * np.cos(angles), radius * np.sin(angles)], axis=1)
        points = np.concatenate(
            [np.c_[ring, np.zeros(len(ring))], np.c_[ring, np.full(len(ring), height)]]
        )
        return points, math.pi * radius * radius * height
    if kind == "sphere":
        (radius,) = size
        directions = np.array(
            [[x, y, z] for x in (-1, 0, 1) for y in (-1, 0, 1) for z in (-1, 0, 1)], dtype=float
        )
        directions = directions[np.linalg.norm(directions, axis=1) > 0]
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        return directions * radius + np.array([0.0, 0.0, radius]), 4.0 / 3.0 * math.pi * radius**3
    raise SceneBuildError(f"unknown primitive {kind!r}")


def primitive_geometry(
    entity_id: str, kind: str, size: tuple[float, ...], density: float
) -> EntityGeometry:
    """Geometry of a primitive entity (no mesh files): box, cylinder or sphere."""
    size = tuple(float(s) for s in size)
    points, volume = _primitive_points(kind, size)
    return EntityGeometry(
        entity_id=entity_id,
        primitive=(kind, size),
        pieces=(),
        points=points,
        mass=volume * density,
        descriptor=None,
        content_sha256=None,
        asset_id=None,
        identity=("primitive", kind, size),
    )


def _inside(root: Path, relpath: str, what: str) -> Path:
    """``root / relpath`` under the one containment rule (no escape, no symlink)."""
    candidate = resolve_inside(root, relpath, where=what, error=SceneBuildError)
    if not candidate.is_file():
        raise SceneBuildError(f"{what}: {candidate} is not a regular file")
    return candidate


def _piece(mesh: trimesh.Trimesh, path: Path) -> MeshPiece:
    try:
        volume = float(mesh.convex_hull.volume)
    except Exception as error:
        raise SceneBuildError(f"{path}: collision piece is degenerate ({error})") from error
    if not volume > 0.0:
        raise SceneBuildError(f"{path}: collision piece has zero volume")
    vertices = np.array(mesh.vertices, dtype=np.float64)
    faces = np.array(mesh.faces, dtype=np.int32)
    vertices.flags.writeable = faces.flags.writeable = False  # shared through mesh_memo
    return MeshPiece(vertices=vertices, faces=faces, volume=volume)


def _piece_bytes(piece: MeshPiece) -> int:
    return piece.vertices.nbytes + piece.faces.nbytes


def _closed_volume(mesh: trimesh.Trimesh) -> float | None:
    """The mesh's own volume when it is closed (None otherwise)."""
    if mesh.is_watertight and mesh.volume > 0:
        return float(mesh.volume)
    return None


def _read_json(path: Path) -> dict[str, Any]:
    value = load_json_strict(
        read_bounded(path, limit=MAX_JSON_BYTES, error=SceneBuildError), str(path),
        error=SceneBuildError,
    )
    if not isinstance(value, dict):
        raise SceneBuildError(f"{path}: expected a JSON object")
    return value


def package_geometry(entity_id: str, catalog_path: Path, density: float) -> EntityGeometry:
    """Geometry of a package entity; prefers the prepared snapshot's convex pieces."""
    if not catalog_path.is_file():
        raise SceneBuildError(f"entity {entity_id!r}: package file {catalog_path} does not exist")
    root = catalog_path.parent
    snapshot_path = root / ".assetcast" / "snapshot.json"
    if snapshot_path.is_file():
        snapshot = _read_json(snapshot_path)
        descriptor = snapshot.get("descriptor")
        visual = snapshot.get("visual_path")
        piece_paths = list(snapshot.get("collision_pieces") or [])
        content_sha256 = snapshot.get("content_sha256")
    else:
        catalog = _read_json(catalog_path)
        descriptor = catalog.get("descriptor")
        visual = catalog.get("visual_path")
        piece_paths = [catalog.get("collision_path") or visual]
        content_sha256 = None
        log.warning("sim.package_without_snapshot", entity=entity_id, package=str(catalog_path))
    if not piece_paths or not all(isinstance(p, str) for p in piece_paths):
        raise SceneBuildError(f"entity {entity_id!r}: {catalog_path} lists no collision pieces")
    # Without a snapshot the collision piece is usually the visual mesh itself: each file
    # is parsed once, whether it serves as a piece, as the mass source, or both (and not at
    # all when mesh_memo knows what its bytes give).
    loaded: dict[Any, trimesh.Trimesh] = {}

    def piece_at(rel: str) -> MeshPiece:
        path = _inside(root, rel, f"entity {entity_id!r}")
        return derived(
            "piece", path, lambda mesh: _piece(mesh, path), _piece_bytes, loaded
        )

    pieces = tuple(piece_at(rel) for rel in piece_paths)
    volume = sum(p.volume for p in pieces)
    visual_path = None
    if isinstance(visual, str):
        # The mesh's own volume is the honest mass source when it is closed; convex
        # pieces over-fill concave parts, so they are only the fallback.
        try:
            visual_path = _inside(root, visual, f"entity {entity_id!r}")
            closed = derived("closed_volume", visual_path, _closed_volume, lambda _v: 64,
                             loaded)
            if closed is not None:
                volume = closed
        except SceneBuildError as error:
            log.warning("sim.visual_mesh_unusable", entity=entity_id, detail=str(error))
    points = np.concatenate([p.vertices for p in pieces])
    physics = _physics(descriptor, entity_id, catalog_path)
    mass = physics.mass(volume, density)
    friction = physics.friction_triple(OBJECT_FRICTION)
    asset_id = descriptor.get("asset_id") if isinstance(descriptor, dict) else None
    return EntityGeometry(
        entity_id=entity_id,
        primitive=None,
        pieces=pieces,
        points=points,
        mass=mass,
        descriptor=descriptor if isinstance(descriptor, dict) else None,
        content_sha256=content_sha256,
        asset_id=asset_id,
        identity=(
            "package",
            content_sha256 or tuple((p.vertices.tobytes(), p.faces.tobytes()) for p in pieces),
            mass,
            friction,
        ),
        visual_path=visual_path,
        friction=friction,
    )


def _physics(descriptor: Any, entity_id: str, catalog_path: Path) -> AssetPhysics:
    """The descriptor's ``physics`` (already validated when the package was prepared; checked
    again here because a deployment is read from disk)."""
    raw = descriptor.get("physics") if isinstance(descriptor, dict) else None
    if raw is None:
        return AssetPhysics()  # no overrides: the scene's density and default friction
    try:
        return AssetPhysics.from_dict(raw, path="descriptor.physics", source=str(catalog_path))
    except AssetValidationError as error:
        raise SceneBuildError(f"entity {entity_id!r}: {error}") from error


def quat_from_yaw(yaw_rad: float) -> np.ndarray:
    return np.array([math.cos(yaw_rad / 2), 0.0, 0.0, math.sin(yaw_rad / 2)])


def rotation_from_quat(quat: np.ndarray) -> np.ndarray:
    w, x, y, z = (float(v) for v in quat)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )
