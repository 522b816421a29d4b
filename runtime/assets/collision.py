"""Convex collision pieces for the simulator.

MuJoCo collides meshes by their convex hulls, so one hull of a whole bin would
fill its interior and nothing could be placed inside. We therefore:

1. split the collision mesh into connected components and take each one's convex
   hull (a bin built from separate floor and wall parts stays open);
2. if the asset declares a ``container_region`` and any piece's axis-aligned box
   still reaches into that region (shrunk by ``INTERIOR_MARGIN_M``) -- typically a
   container modelled as one connected open surface -- we discard the hulls and
   *carve* instead: the walls are ``bounds_m`` minus the container region, as up to
   five axis-aligned boxes (floor below the region, two X walls spanning the full
   depth, two Y walls between them). The top stays open and the region stays free.
   This trades exact wall shape (a round cup gets square walls) for a guarantee.

Degenerate components (flat or collinear) become thin boxes around their extent.
More components than the run's ``max_collision_pieces`` (default ``MAX_PIECES``) collapse
to one hull of the whole mesh: the number of pieces a snapshot holds, and the simulator
loads, stays bounded whatever the mesh.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import trimesh

from domain.assets import AssetDescriptor, Bounds3D
from domain.limits import DEFAULT_MAX_COLLISION_PIECES

MAX_PIECES = DEFAULT_MAX_COLLISION_PIECES
INTERIOR_MARGIN_M = 1e-4
MIN_THICKNESS_M = 5e-4
_MIN_VOLUME_M3 = 1e-15


def _box(lower: Sequence[float], upper: Sequence[float]) -> trimesh.Trimesh:
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    centre = (lo + hi) / 2.0
    return trimesh.creation.box(
        extents=hi - lo, transform=trimesh.transformations.translation_matrix(centre)
    )


def _hull(component: trimesh.Trimesh) -> trimesh.Trimesh:
    try:
        hull = component.convex_hull
        if len(hull.faces) >= 4 and abs(hull.volume) > _MIN_VOLUME_M3:
            return hull
    except Exception:  # qhull refuses flat input; fall through to a thin box
        pass
    lo, hi = component.bounds
    pad = np.maximum(MIN_THICKNESS_M - (hi - lo), 0.0) / 2.0
    return _box(lo - pad, hi + pad)


def _intrudes(piece: trimesh.Trimesh, region: Bounds3D) -> bool:
    lo, hi = piece.bounds
    inner_lo = np.asarray(region.lower) + INTERIOR_MARGIN_M
    inner_hi = np.asarray(region.upper) - INTERIOR_MARGIN_M
    return bool(np.all(lo < inner_hi) and np.all(hi > inner_lo))


def carve_container(bounds: Bounds3D, region: Bounds3D) -> list[trimesh.Trimesh]:
    """Walls and floor of ``bounds`` around ``region`` as up to five boxes."""
    (bx0, by0, bz0), (bx1, by1, bz1) = bounds.lower, bounds.upper
    (rx0, ry0, rz0), (rx1, ry1, _) = region.lower, region.upper
    boxes = [
        ((bx0, by0, bz0), (bx1, by1, rz0)),  # floor
        ((bx0, by0, rz0), (rx0, by1, bz1)),  # -X wall, full depth
        ((rx1, by0, rz0), (bx1, by1, bz1)),  # +X wall, full depth
        ((rx0, by0, rz0), (rx1, ry0, bz1)),  # -Y wall, between the X walls
        ((rx0, ry1, rz0), (rx1, by1, bz1)),  # +Y wall
    ]
    pieces = []
    for lower, upper in boxes:
        if all(u - lo_ > MIN_THICKNESS_M / 10 for lo_, u in zip(lower, upper, strict=True)):
            pieces.append(_box(lower, upper))
    return pieces


def convex_pieces(
    mesh: trimesh.Trimesh, descriptor: AssetDescriptor, *, max_pieces: int = MAX_PIECES
) -> tuple[list[trimesh.Trimesh], str]:
    """Convex pieces for ``mesh`` and the method used ("components", "hull", "carved")."""
    components = mesh.split(only_watertight=False)
    if not components or len(components) > max_pieces:
        pieces, method = [_hull(mesh)], "hull"
    else:
        pieces, method = [_hull(c) for c in components], "components"
    region = descriptor.container_region
    if region is not None and any(_intrudes(p, region) for p in pieces):
        bounds = descriptor.bounds_m or Bounds3D(
            tuple(mesh.bounds[0].tolist()), tuple(mesh.bounds[1].tolist())
        )
        carved = carve_container(bounds, region)
        if carved:
            return carved, "carved"
    # Canonical order so derived bytes do not depend on the loader's component order.
    pieces.sort(key=lambda p: (tuple(np.round(p.bounds[0], 9)), tuple(np.round(p.bounds[1], 9))))
    return pieces, method
