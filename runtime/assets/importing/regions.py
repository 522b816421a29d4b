"""Estimating ``container_region`` and ``support_region`` from the mesh itself.

A container region is the usable interior cavity: measured by casting rays from inside
the opening down to the inner floor and out to the inner wall at several heights, so it
is never the exterior box (a thick-walled bin's box would put objects inside its walls).
A support region is the flat top, checked by rays landing on it. Both shrink by a small
margin so they lie strictly inside what was measured; both are estimates and say so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import trimesh

from domain.assets import Bounds3D
from domain.errors import AssetValidationError

#: Directions of the horizontal rays that find the inner wall.
WALL_RAY_DIRECTIONS = 32
#: Heights (as shares of the cavity depth above the floor) where the wall is measured.
WALL_HEIGHT_FRACTIONS = (0.05, 0.25, 0.5, 0.75, 0.95)
#: Inset from every measured surface (metres), so the region is strictly inside.
REGION_MARGIN_M = 0.001
#: Faces this close to the top (metres) with an upward normal make the flat top.
TOP_TOLERANCE_M = 0.0005
SUPPORT_GRID = 7


@dataclass(frozen=True)
class EstimatedRegion:
    """A region and the provenance entry saying how it was estimated."""

    region: Bounds3D
    evidence: dict[str, Any]


def _first_hit(mesh: trimesh.Trimesh, origins: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """Distance to the first surface along each ray (``inf`` where the ray escapes).

    Moeller-Trumbore over all triangles, one ray at a time: a few hundred rays are cast,
    and trimesh's own ray query needs ``rtree``, which is not a dependency.
    """
    triangles = np.asarray(mesh.triangles, dtype=np.float64)
    v0 = triangles[:, 0]
    edge1 = triangles[:, 1] - v0
    edge2 = triangles[:, 2] - v0
    distances = np.full(len(origins), np.inf)
    for index, (origin, direction) in enumerate(zip(origins, directions, strict=True)):
        p = np.cross(direction, edge2)
        det = np.einsum("ij,ij->i", edge1, p)
        usable = np.abs(det) > 1e-15
        inv = np.zeros_like(det)
        inv[usable] = 1.0 / det[usable]
        t_vec = origin - v0
        u = np.einsum("ij,ij->i", t_vec, p) * inv
        q = np.cross(t_vec, edge1)
        v = (q @ direction) * inv
        t = np.einsum("ij,ij->i", edge2, q) * inv
        hit = usable & (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 1e-9)
        if hit.any():
            distances[index] = float(t[hit].min())
    return distances


def estimate_container(mesh: trimesh.Trimesh, probe_xy: tuple[float, float]) -> EstimatedRegion:
    """The largest axis-aligned box around ``probe_xy`` (the footprint centre) that fits
    the cavity at every measured height, from the inner floor to the rim."""
    top = float(mesh.bounds[1][2])
    px, py = probe_xy
    down = _first_hit(mesh, np.array([[px, py, top + 1.0]]), np.array([[0.0, 0.0, -1.0]]))[0]
    if not np.isfinite(down):
        raise AssetValidationError(
            f"--container: a ray down through the footprint centre ({px:.4g}, {py:.4g}) "
            "hits no floor: the mesh has no open top there"
        )
    floor = top + 1.0 - float(down)
    depth = max(0.0, round(top - floor, 12))
    if depth <= 2 * REGION_MARGIN_M:
        raise AssetValidationError(
            f"--container: the surface under the opening is {depth:.4g} m below the rim: "
            "no cavity to hold anything"
        )
    angles = np.arange(WALL_RAY_DIRECTIONS) * (2 * math.pi / WALL_RAY_DIRECTIONS)
    directions = np.stack([np.cos(angles), np.sin(angles), np.zeros_like(angles)], axis=1)
    radial = np.full(WALL_RAY_DIRECTIONS, np.inf)
    for fraction in WALL_HEIGHT_FRACTIONS:
        z = floor + fraction * depth
        origins = np.tile([px, py, z], (WALL_RAY_DIRECTIONS, 1))
        hits = _first_hit(mesh, origins, directions)
        if not np.isfinite(hits).all():
            open_side = math.degrees(float(angles[int(np.argmax(~np.isfinite(hits)))]))
            raise AssetValidationError(
                f"--container: no inner wall at height {z:.4g} m in direction "
                f"{open_side:.0f} degrees: the cavity is not enclosed"
            )
        radial = np.minimum(radial, hits)
    quarter = WALL_RAY_DIRECTIONS // 4
    half_x = float(min(radial[0], radial[2 * quarter]))
    half_y = float(min(radial[quarter], radial[3 * quarter]))
    # Scale the (half_x, half_y) rectangle until every ray direction's wall is outside it.
    with np.errstate(divide="ignore"):
        to_edge = np.minimum(
            half_x / np.abs(directions[:, 0]), half_y / np.abs(directions[:, 1])
        )
    shrink = min(1.0, float(np.min(radial / to_edge)))
    ax = shrink * half_x - REGION_MARGIN_M
    ay = shrink * half_y - REGION_MARGIN_M
    if ax <= 0 or ay <= 0:
        raise AssetValidationError("--container: the cavity is narrower than the margin")
    region = Bounds3D((px - ax, py - ay, floor + REGION_MARGIN_M), (px + ax, py + ay, top))
    evidence = {
        "estimated": True,
        "method": "ray casts from the footprint centre: down to the inner floor, out to the "
        f"inner wall in {WALL_RAY_DIRECTIONS} directions at {len(WALL_HEIGHT_FRACTIONS)} "
        f"heights; inset {REGION_MARGIN_M} m",
        "floor_z_m": floor,
        "min_wall_distance_m": float(radial.min()),
    }
    return EstimatedRegion(region, evidence)


def estimate_support(mesh: trimesh.Trimesh) -> EstimatedRegion:
    """The flat top: the box of upward faces at the top, shrunk until rays dropped on a
    grid over it all land at the top height (a top with a hole or notch shrinks)."""
    top = float(mesh.bounds[1][2])
    normals = np.asarray(mesh.face_normals)
    triangles = np.asarray(mesh.triangles)
    at_top = np.abs(triangles[:, :, 2] - top).max(axis=1) <= TOP_TOLERANCE_M
    on_top = (normals[:, 2] > 0.999) & at_top
    if not on_top.any():
        raise AssetValidationError("--support: the mesh has no flat face at its top")
    points = triangles[on_top].reshape(-1, 3)[:, :2]
    lower, upper = points.min(axis=0), points.max(axis=0)
    centre = (lower + upper) / 2
    half = (upper - lower) / 2 - REGION_MARGIN_M
    grid = np.linspace(-1.0, 1.0, SUPPORT_GRID)
    for _ in range(20):
        if (half <= 0).any():
            break
        xs, ys = np.meshgrid(centre[0] + grid * half[0], centre[1] + grid * half[1])
        origins = np.stack([xs.ravel(), ys.ravel(), np.full(xs.size, top + 1.0)], axis=1)
        down = np.tile([0.0, 0.0, -1.0], (len(origins), 1))
        landed = np.abs((top + 1.0 - _first_hit(mesh, origins, down)) - top) <= TOP_TOLERANCE_M
        if landed.all():
            region = Bounds3D(
                (float(centre[0] - half[0]), float(centre[1] - half[1]), top),
                (float(centre[0] + half[0]), float(centre[1] + half[1]), top),
            )
            evidence = {
                "estimated": True,
                "method": "upward faces at the top, checked by a "
                f"{SUPPORT_GRID}x{SUPPORT_GRID} grid of downward rays; inset "
                f"{REGION_MARGIN_M} m",
            }
            return EstimatedRegion(region, evidence)
        half = half * 0.9
    raise AssetValidationError("--support: no flat rectangle found on the mesh's top")


def estimate_pouring(mesh: trimesh.Trimesh, probe_xy: tuple[float, float]) -> dict[str, Any]:
    """``provenance.pouring`` from the rim: the inner radius just below the top, the smallest
    distance from the opening's centre to the inner wall (a round mouth's radius; an oval or
    square mouth's narrowest half-width). It serves as both the mouth radius (pouring out)
    and the opening radius (pouring in)."""
    top = float(mesh.bounds[1][2])
    height = top - float(mesh.bounds[0][2])
    z = top - max(2 * REGION_MARGIN_M, 0.01 * height)
    px, py = probe_xy
    angles = np.arange(WALL_RAY_DIRECTIONS) * (2 * math.pi / WALL_RAY_DIRECTIONS)
    directions = np.stack([np.cos(angles), np.sin(angles), np.zeros_like(angles)], axis=1)
    hits = _first_hit(mesh, np.tile([px, py, z], (WALL_RAY_DIRECTIONS, 1)), directions)
    if not np.isfinite(hits).all():
        raise AssetValidationError(
            f"--pouring: no rim around the footprint centre at height {z:.4g} m "
            "(the mouth is not enclosed there)"
        )
    radius = float(hits.min())
    evidence = (
        f"estimated by assetcast catalog import: smallest of {WALL_RAY_DIRECTIONS} ray "
        f"distances from the footprint centre to the inner rim at z={z:.4g} m"
    )
    return {"mouth_radius_m": radius, "opening_radius_m": radius, "evidence": evidence}
