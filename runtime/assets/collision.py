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

The pieces are content-addressed (their OBJ bytes are in the snapshot digest list), so they
are defined as what trimesh's ``split`` + ``convex_hull`` + ``creation.box`` produce. Those
build a ``Trimesh`` object (with its caches, hashing and repairs) per component, hull and
box, which was most of a small package's preparation time; here the same trimesh/scipy
functions run on plain arrays. A hull takes that short path only when trimesh's repair
steps provably change nothing (every vertex used and distinct, watertight, consistently
wound, volume clearly positive); any other hull is built by trimesh itself, so the bytes
are the same either way (``tests/runtime/test_collision_pieces.py`` compares both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import trimesh
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import ConvexHull, QhullError
from trimesh import grouping, triangles, util
from trimesh.constants import tol
from trimesh.convex import QHULL_DEFAULT
from trimesh.transformations import transform_points, translation_matrix

from domain.assets import AssetDescriptor, Bounds3D
from domain.limits import DEFAULT_MAX_COLLISION_PIECES

MAX_PIECES = DEFAULT_MAX_COLLISION_PIECES
INTERIOR_MARGIN_M = 1e-4
MIN_THICKNESS_M = 5e-4
_MIN_VOLUME_M3 = 1e-15
# A hull this close to the volume threshold (or to zero) is left to trimesh itself.
_SURE_VOLUME_M3 = 1e3 * _MIN_VOLUME_M3
# Far above qhull's round-off: a hull's bounds are its points' bounds to within it.
_SURE_MARGIN_M = 1e-9
_QHULL_OPTIONS = str(QHULL_DEFAULT)
_MERGE_SCALE = 10 ** util.decimal_to_digits(tol.merge)
_IDENTITY4 = np.eye(4)
_UNIT_BOX = trimesh.creation.box()
_UNIT_BOX_VERTICES = np.array(_UNIT_BOX.vertices, dtype=np.float64)
_UNIT_BOX_FACES = np.array(_UNIT_BOX.faces, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Piece:
    """One convex collision piece: ``(n, 3)`` float64 vertices, ``(m, 3)`` int faces."""

    vertices: np.ndarray
    faces: np.ndarray

    @property
    def bounds(self) -> np.ndarray:
        return np.array([self.vertices.min(axis=0), self.vertices.max(axis=0)])


def _box(lower: Sequence[float], upper: Sequence[float]) -> Piece:
    """``trimesh.creation.box(extents, translation_matrix(centre))``, as arrays."""
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    centre = (lo + hi) / 2.0
    vertices = _UNIT_BOX_VERTICES * np.asarray(hi - lo, dtype=np.float64)
    matrix = np.asarray(translation_matrix(centre), order="C", dtype=np.float64)
    if not util.allclose(matrix, _IDENTITY4, 1e-8):
        vertices = transform_points(vertices, matrix=matrix)
    return Piece(vertices, _UNIT_BOX_FACES.copy())


def _thin_box(points: np.ndarray) -> Piece:
    lo, hi = points.min(axis=0), points.max(axis=0)
    pad = np.maximum(MIN_THICKNESS_M - (hi - lo), 0.0) / 2.0
    return _box(lo - pad, hi + pad)


def _trimesh_hull(points: np.ndarray, faces: np.ndarray) -> Piece:
    """The hull exactly as trimesh builds it (the reference, and the path for any hull the
    array path cannot prove identical)."""
    component = trimesh.Trimesh(vertices=points, faces=faces, process=False)
    try:
        hull = component.convex_hull
        if len(hull.faces) >= 4 and abs(hull.volume) > _MIN_VOLUME_M3:
            return Piece(hull.vertices.view(np.ndarray), hull.faces.view(np.ndarray))
    except Exception:  # qhull refuses flat input; fall through to a thin box
        pass
    return _thin_box(points)


def _array_hull(points: np.ndarray) -> Piece | None:
    """``trimesh.convex.convex_hull(points)`` without the Trimesh object, or None when the
    steps it skips (merging vertices, fixing winding or inversion) might change something."""
    try:
        hull = ConvexHull(points, qhull_options=_QHULL_OPTIONS)
    except QhullError:
        return None  # trimesh retries with joggling, or gives up: let it
    vid = np.sort(hull.vertices)
    mask = np.zeros(len(hull.points), dtype=np.int64)
    mask[vid] = np.arange(len(vid))
    faces = mask[hull.simplices].copy()
    vertices = hull.points[vid].copy()
    crosses = triangles.cross(vertices[faces])
    normals, valid = util.unitize(crosses, check_valid=True)
    faces = faces[valid]
    crosses = crosses[valid]
    if len(faces) < 4:
        return None
    area = triangles.area(crosses=crosses)
    centres = vertices[faces].mean(axis=1)
    if not area.sum() > 0.0:
        return None
    centroid = np.average(centres, weights=area, axis=0)
    backwards = util.diagonal_dot(normals, centres - centroid) < 0.0
    faces[backwards] = np.fliplr(faces[backwards])
    used = np.zeros(len(vertices), dtype=bool)
    used[faces] = True
    if not used.all():
        return None  # merge_vertices would drop (and renumber) unused vertices
    rounded = (vertices * _MERGE_SCALE).round().astype(np.int64)
    if len(grouping.unique_rows(rounded)[0]) != len(vertices):
        return None  # merge_vertices would merge some
    watertight, winding = _watertight_and_wound(faces)
    if not (watertight and winding):
        return None  # fix_normals would re-wind faces
    tris = vertices[faces]
    volume = float(np.einsum("ij,ij->i", tris[:, 0], np.cross(tris[:, 1], tris[:, 2])).sum()) / 6
    if not volume > _SURE_VOLUME_M3:
        return None  # inverted, or near trimesh's degenerate-volume threshold
    return Piece(vertices, faces)


def _hull(points: np.ndarray, faces: np.ndarray) -> Piece:
    return _array_hull(points) or _trimesh_hull(points, faces)


def _edges(faces: np.ndarray) -> np.ndarray:
    """Each face's three directed edges, in ``trimesh.geometry.faces_to_edges`` order."""
    return faces[:, [0, 1, 1, 2, 2, 0]].reshape((-1, 2))


def _pairs(edges_sorted: np.ndarray) -> np.ndarray:
    """Indices ``(i, j)`` of the rows of ``edges_sorted`` that occur exactly twice (the rows
    ``trimesh.grouping.group_rows(..., require_count=2)`` groups; which pairs, not in what
    order, is all any caller here depends on)."""
    if len(edges_sorted) == 0:
        return np.empty((0, 2), dtype=np.int64)
    width = int(edges_sorted.max()) + 1
    keys = edges_sorted[:, 0].astype(np.int64) * width + edges_sorted[:, 1]
    order = np.argsort(keys, kind="stable")
    ranked = keys[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    counts = np.diff(np.r_[starts, len(ranked)])
    twice = starts[counts == 2]
    return np.column_stack([order[twice], order[twice + 1]])


def _components(faces: np.ndarray) -> list[np.ndarray]:
    """Face indices of each connected component (faces sharing an edge no third face
    shares), in the order ``Trimesh.split`` returns them: by scipy's component label."""
    edges = _edges(faces)
    edges_sorted = np.sort(edges, axis=1)
    pairs = _pairs(edges_sorted) // 3  # edge index -> its face
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    count = len(faces)
    graph_matrix = coo_matrix(
        (np.ones(len(pairs), dtype=bool), (pairs[:, 0], pairs[:, 1])), shape=(count, count)
    )
    _, labels = connected_components(graph_matrix, directed=False)
    order = np.argsort(labels, kind="stable")
    bounds = np.flatnonzero(np.diff(labels[order])) + 1
    return np.split(order, bounds)


def _watertight_and_wound(faces: np.ndarray) -> tuple[bool, bool]:
    """``trimesh.graph.is_watertight``: every edge shared by exactly two faces, and each
    shared edge traversed in opposite directions by them."""
    edges = _edges(faces)
    pairs = _pairs(np.sort(edges, axis=1))
    watertight = len(pairs) * 2 == len(edges)
    wound = bool(np.all(edges[pairs[:, 0], 1] == edges[pairs[:, 1], 0]))
    return watertight, wound


def _intrudes(piece: Piece, region: Bounds3D) -> bool:
    lo, hi = piece.bounds
    inner_lo = np.asarray(region.lower) + INTERIOR_MARGIN_M
    inner_hi = np.asarray(region.upper) - INTERIOR_MARGIN_M
    return bool(np.all(lo < inner_hi) and np.all(hi > inner_lo))


def carve_container(bounds: Bounds3D, region: Bounds3D) -> list[Piece]:
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


def _surely_intrudes(points: np.ndarray, region: Bounds3D) -> bool:
    """Whether the hull of ``points`` intrudes into ``region`` without building it: its
    bounds are the points' bounds up to qhull's round-off (a degenerate hull's thin box only
    grows them), so a margin far above round-off makes the answer certain."""
    lo, hi = points.min(axis=0), points.max(axis=0)
    inner_lo = np.asarray(region.lower) + INTERIOR_MARGIN_M
    inner_hi = np.asarray(region.upper) - INTERIOR_MARGIN_M
    return bool(np.all(lo + _SURE_MARGIN_M < inner_hi) and np.all(hi - _SURE_MARGIN_M > inner_lo))


def convex_pieces(
    vertices: np.ndarray,
    faces: np.ndarray,
    descriptor: AssetDescriptor,
    *,
    max_pieces: int = MAX_PIECES,
) -> tuple[list[Piece], str]:
    """Convex pieces for a processed mesh (every vertex used by a face, as ``load_mesh``
    returns it) and the method used ("components", "hull", "carved")."""
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64)
    components = _components(faces)
    parts: list[tuple[np.ndarray, np.ndarray]]
    if not components or len(components) > max_pieces:
        parts, method = [(vertices, faces)], "hull"
    else:
        parts = []
        for index in components:
            current = faces[index]
            used = np.unique(current.reshape(-1))
            renumber = np.zeros(len(vertices), dtype=np.int64)
            renumber[used] = np.arange(len(used))
            parts.append((vertices[used], renumber[current]))
        method = "components"
    region = descriptor.container_region
    bounds = descriptor.bounds_m or Bounds3D(
        tuple(vertices.min(axis=0).tolist()), tuple(vertices.max(axis=0).tolist())
    )
    if region is not None and any(_surely_intrudes(points, region) for points, _ in parts):
        carved = carve_container(bounds, region)
        if carved:
            return carved, "carved"  # the hulls would be discarded: none is built
    pieces = [_hull(points, part_faces) for points, part_faces in parts]
    if region is not None and any(_intrudes(p, region) for p in pieces):
        carved = carve_container(bounds, region)
        if carved:
            return carved, "carved"
    # Canonical order so derived bytes do not depend on the loader's component order.
    pieces.sort(key=lambda p: (tuple(np.round(p.bounds[0], 9)), tuple(np.round(p.bounds[1], 9))))
    return pieces, method
