"""Collision pieces computed on arrays are byte for byte what trimesh's objects produce.

The pieces are content-addressed (their OBJ bytes are digested into every snapshot), so the
array path (``runtime.assets.collision``) must reproduce exactly the algorithm snapshots were
built with: ``Trimesh.split`` -> ``convex_hull`` per component (thin box when degenerate),
carving with ``trimesh.creation.box``, the canonical sort. ``_reference`` below is that
algorithm, written with trimesh objects; every mesh here must give identical bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trimesh

from domain.assets import AssetDescriptor, Bounds3D
from runtime.assets import collision
from runtime.assets.demo_catalog import write_demo_catalog
from runtime.assets.mesh_writers import obj_bytes
from runtime.assets.meshes import load_mesh
from runtime.assets.package import read_manifest


def _ref_box(lower: object, upper: object) -> trimesh.Trimesh:
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    return trimesh.creation.box(
        extents=hi - lo, transform=trimesh.transformations.translation_matrix((lo + hi) / 2.0)
    )


def _ref_hull(component: trimesh.Trimesh) -> trimesh.Trimesh:
    try:
        hull = component.convex_hull
        if len(hull.faces) >= 4 and abs(hull.volume) > 1e-15:
            return hull
    except Exception:  # noqa: BLE001 - as the reference did
        pass
    lo, hi = component.bounds
    pad = np.maximum(collision.MIN_THICKNESS_M - (hi - lo), 0.0) / 2.0
    return _ref_box(lo - pad, hi + pad)


def _ref_intrudes(piece: trimesh.Trimesh, region: Bounds3D) -> bool:
    lo, hi = piece.bounds
    inner_lo = np.asarray(region.lower) + collision.INTERIOR_MARGIN_M
    inner_hi = np.asarray(region.upper) - collision.INTERIOR_MARGIN_M
    return bool(np.all(lo < inner_hi) and np.all(hi > inner_lo))


def _ref_carve(bounds: Bounds3D, region: Bounds3D) -> list[trimesh.Trimesh]:
    (bx0, by0, bz0), (bx1, by1, bz1) = bounds.lower, bounds.upper
    (rx0, ry0, rz0), (rx1, ry1, _) = region.lower, region.upper
    boxes = [
        ((bx0, by0, bz0), (bx1, by1, rz0)), ((bx0, by0, rz0), (rx0, by1, bz1)),
        ((rx1, by0, rz0), (bx1, by1, bz1)), ((rx0, by0, rz0), (rx1, ry0, bz1)),
        ((rx0, ry1, rz0), (rx1, by1, bz1)),
    ]
    return [
        _ref_box(lower, upper) for lower, upper in boxes
        if all(u - lo_ > collision.MIN_THICKNESS_M / 10 for lo_, u in zip(lower, upper,
                                                                          strict=True))
    ]


def _reference(
    mesh: trimesh.Trimesh, descriptor: AssetDescriptor, max_pieces: int
) -> tuple[list[trimesh.Trimesh], str]:
    components = mesh.split(only_watertight=False)
    if not components or len(components) > max_pieces:
        pieces, method = [_ref_hull(mesh)], "hull"
    else:
        pieces, method = [_ref_hull(c) for c in components], "components"
    region = descriptor.container_region
    if region is not None and any(_ref_intrudes(p, region) for p in pieces):
        bounds = descriptor.bounds_m or Bounds3D(
            tuple(mesh.bounds[0].tolist()), tuple(mesh.bounds[1].tolist())
        )
        carved = _ref_carve(bounds, region)
        if carved:
            return carved, "carved"
    pieces.sort(key=lambda p: (tuple(np.round(p.bounds[0], 9)), tuple(np.round(p.bounds[1], 9))))
    return pieces, method


def _descriptor(region: Bounds3D | None = None) -> AssetDescriptor:
    return AssetDescriptor.from_dict(
        {"asset_id": "x", "category": "thing",
         "container_region": None if region is None else
         {"lower": list(region.lower), "upper": list(region.upper)}}
    )


def _assert_same(mesh: trimesh.Trimesh, descriptor: AssetDescriptor, max_pieces: int = 8) -> str:
    processed = trimesh.Trimesh(mesh.vertices.copy(), mesh.faces.copy(), process=True)
    expected, expected_method = _reference(processed.copy(), descriptor, max_pieces)
    got, method = collision.convex_pieces(
        processed.vertices.view(np.ndarray), processed.faces.view(np.ndarray), descriptor,
        max_pieces=max_pieces,
    )
    assert method == expected_method
    assert [obj_bytes(p.vertices, p.faces) for p in got] == [
        obj_bytes(p.vertices, p.faces) for p in expected
    ]
    return method


def _random_meshes(rng: np.random.Generator) -> list[trimesh.Trimesh]:
    meshes = []
    for _ in range(25):
        parts = []
        for _ in range(int(rng.integers(1, 5))):
            kind = int(rng.integers(0, 5))
            if kind == 0:
                part = trimesh.creation.box(extents=rng.uniform(0.005, 0.2, 3))
            elif kind == 1:
                part = trimesh.creation.cylinder(
                    radius=float(rng.uniform(0.005, 0.1)), height=float(rng.uniform(0.01, 0.2)),
                    sections=int(rng.integers(5, 40)),
                )
            elif kind == 2:
                part = trimesh.creation.icosphere(subdivisions=int(rng.integers(0, 3)),
                                                  radius=float(rng.uniform(0.01, 0.1)))
            elif kind == 3:  # a random point cloud's hull: many coplanar-free facets
                part = trimesh.convex.convex_hull(rng.normal(size=(int(rng.integers(4, 60)), 3)))
                part.apply_scale(float(rng.uniform(0.01, 0.1)))
            else:  # a flat quad: a degenerate component (thin box)
                corners = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=float)
                part = trimesh.Trimesh(corners * rng.uniform(0.01, 0.1), [[0, 1, 2], [0, 2, 3]])
            part.apply_transform(trimesh.transformations.random_rotation_matrix(rng.random(3)))
            part.apply_translation(rng.uniform(-0.2, 0.2, 3))
            parts.append(part)
        meshes.append(trimesh.util.concatenate(parts))
    return meshes


def test_random_meshes_give_the_reference_bytes() -> None:
    rng = np.random.default_rng(16)
    methods = set()
    for mesh in _random_meshes(rng):
        methods.add(_assert_same(mesh, _descriptor()))
        methods.add(_assert_same(mesh, _descriptor(), max_pieces=2))
        lo, hi = mesh.bounds
        centre, half = (lo + hi) / 2, (hi - lo) / 4
        region = Bounds3D(tuple((centre - half).tolist()), tuple((centre + half).tolist()))
        methods.add(_assert_same(mesh, _descriptor(region)))
    assert methods == {"components", "hull", "carved"}


def test_edge_cases_give_the_reference_bytes() -> None:
    # Duplicate faces, a collinear sliver, a single triangle, an open surface, a box at the
    # origin (no translation) and one a hair off it.
    box = trimesh.creation.box(extents=[0.02, 0.03, 0.04])
    sliver = trimesh.Trimesh([[0, 0, 0], [1e-3, 0, 0], [2e-3, 0, 0]], [[0, 1, 2]], process=False)
    triangle = trimesh.Trimesh([[0, 0, 0], [0.01, 0, 0], [0, 0.01, 0]], [[0, 1, 2]])
    open_cup = trimesh.creation.cylinder(radius=0.03, height=0.05, sections=16)
    open_cup = trimesh.Trimesh(open_cup.vertices, open_cup.faces[open_cup.face_normals[:, 2]
                                                                  < 0.99])
    doubled = trimesh.Trimesh(box.vertices, np.vstack([box.faces, box.faces]), process=False)
    nudged = box.copy()
    nudged.apply_translation([1e-9, 0, 0])
    for mesh in (box, sliver, triangle, open_cup, doubled, nudged,
                 trimesh.util.concatenate([box, sliver, triangle])):
        _assert_same(mesh, _descriptor())
    region = Bounds3D((-0.025, -0.025, -0.02), (0.025, 0.025, 0.03))
    assert _assert_same(open_cup, _descriptor(region)) == "carved"


def test_demo_catalog_gives_the_reference_bytes(tmp_path: Path) -> None:
    for package in write_demo_catalog(tmp_path):
        manifest = read_manifest(package)
        mesh = load_mesh(package / (manifest.collision_path or manifest.visual_path), label="m")
        expected, method = _reference(mesh.copy(), manifest.descriptor, 8)
        got, got_method = collision.convex_pieces(
            mesh.vertices.view(np.ndarray), mesh.faces.view(np.ndarray), manifest.descriptor
        )
        assert got_method == method, package.name
        assert [obj_bytes(p.vertices, p.faces) for p in got] == [
            obj_bytes(p.vertices, p.faces) for p in expected
        ], package.name


@pytest.mark.parametrize("points", [
    np.zeros((4, 3)),  # every point the same: qhull refuses, a thin box stands in
    np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], dtype=float) * 0.01,  # coplanar
])
def test_degenerate_point_sets_become_the_reference_thin_box(points: np.ndarray) -> None:
    faces = np.array([[0, 1, 2], [1, 3, 2]])
    reference = _ref_hull(trimesh.Trimesh(points, faces, process=False))
    piece = collision._hull(points, faces)
    assert obj_bytes(piece.vertices, piece.faces) == obj_bytes(reference.vertices,
                                                               reference.faces)


def test_obj_bytes_is_shortest_round_trip_text_of_every_float() -> None:
    """The OBJ writer's bytes are content-addressed: each vertex is ``repr`` of its float64
    value (float32 input widened exactly), each face 1-based, whatever the array dtypes."""
    rng = np.random.default_rng(3)
    for dtype in (np.float64, np.float32):
        vertices = (rng.normal(size=(20, 3)) * 10.0 ** rng.integers(-9, 4)).astype(dtype)
        vertices[0] = [-0.0, 0.0, 1e-30]
        faces = rng.integers(0, 20, (30, 3)).astype(np.int32)
        expected = "".join(
            f"v {float(x)!r} {float(y)!r} {float(z)!r}\n" for x, y, z in vertices
        ) + "".join(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in faces.astype(np.int64))
        assert obj_bytes(vertices, faces) == expected.encode("ascii")
        assert obj_bytes(vertices, faces, comment="c") == b"# c\n" + expected.encode("ascii")
