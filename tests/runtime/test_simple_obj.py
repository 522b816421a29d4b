"""A plain OBJ read by ``simple_obj`` is exactly the mesh trimesh's loader makes of it, and
anything less plain is left to trimesh."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from domain.errors import AssetValidationError
from domain.limits import MeshLimits, MeshTooLarge
from runtime.assets.demo_catalog import write_demo_catalog
from runtime.assets.mesh_writers import obj_bytes
from runtime.assets.meshes import load_mesh, load_mesh_arrays
from runtime.assets.simple_obj import parse_simple_obj


def _same_as_trimesh(path: Path) -> None:
    mesh = load_mesh(path, label="m")
    vertices, faces = load_mesh_arrays(path, path.read_bytes(), label="m")
    assert vertices.dtype == np.float64 and faces.dtype == np.int64
    assert np.array_equal(vertices, mesh.vertices) and np.array_equal(faces, mesh.faces)
    # Bit for bit (array_equal calls 0.0 and -0.0 equal; the OBJ bytes of a piece do not).
    assert obj_bytes(vertices, faces) == obj_bytes(mesh.vertices, mesh.faces)


def test_demo_catalog_objs_load_as_trimesh_loads_them(tmp_path: Path) -> None:
    objs = [p / "mesh.obj" for p in write_demo_catalog(tmp_path) if (p / "mesh.obj").exists()]
    assert len(objs) > 15
    assert any(b"usemtl" in p.read_bytes() for p in objs)  # the header form is covered
    for path in objs:
        assert parse_simple_obj(path.read_bytes()) is not None, path
        _same_as_trimesh(path)


def _text(rng: np.random.Generator, count: int) -> str:
    formats = [repr, lambda x: f"{x:.3e}", lambda x: f"{x:g}", lambda x: f"{x:+.17f}"]
    lines = ["# generated", "mtllib m.mtl", "usemtl a"]
    points = rng.normal(scale=0.05, size=(count, 3))
    points[rng.random(count) < 0.2] = points[0]  # duplicates: merged by processing
    points[1] = [-0.0, 0.0, 1e-9]
    for p in points:
        fmt = formats[int(rng.integers(len(formats)))]
        lines.append("v " + " ".join(fmt(float(x)) for x in p))
    for _ in range(2 * count):
        a, b, c = rng.choice(count - 2, 3, replace=False) + 1  # the last two stay unused
        lines.append(f"f {a} {b} {c}")
    return "\n".join(lines) + "\n"


def test_generated_objs_load_as_trimesh_loads_them(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    for index in range(30):
        path = tmp_path / f"m{index}.obj"
        path.write_text(_text(rng, int(rng.integers(5, 200))))
        assert parse_simple_obj(path.read_bytes()) is not None
        _same_as_trimesh(path)


@pytest.mark.parametrize("text", [
    "v 0 0 0\nv 1 0 0\nv 0 1 0\nvt 0 0\nf 1/1 2/1 3/1\n",  # texture coordinates
    "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 1 1 0\nf 1 2 3 4\n",  # a polygon
    "v 0 0 0\nv 1 0 0\nv 0 1 0\nf -3 -2 -1\n",  # relative indices
    "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\nusemtl b\nf 1 3 2\n",  # a second material group
    "v 0 0 0\nv 1 0 0\nv 0 1 0\ng part\nf 1 2 3\n",  # a group
    "v\t0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n",  # a tab
    "v 0 0 0\r\nv 1 0 0\r\nv 0 1 0\r\nf 1 2 3\r\n",  # CRLF
    "v 0 0 0 1 1 1\nv 1 0 0 1 1 1\nv 0 1 0 1 1 1\nf 1 2 3\n",  # vertex colours
    "v 0 0 0\nv 1 0 0\nf 1 2 3\n",  # a dangling index
    "v 0 0 0\nv 1 0 0\nv 0 1 0\n",  # no faces
    "v 0 0 0\nv 1 0 x\nv 0 1 0\nf 1 2 3\n",  # not a number
])
def test_anything_less_plain_is_left_to_trimesh(text: str) -> None:
    assert parse_simple_obj(text.encode()) is None


def test_fallback_files_still_load_through_trimesh(tmp_path: Path) -> None:
    path = tmp_path / "quad.obj"
    path.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 1 1 0\nf 1 2 4 3\n")
    _same_as_trimesh(path)


def test_the_same_checks_run_on_the_fast_path(tmp_path: Path) -> None:
    path = tmp_path / "nan.obj"
    path.write_text("v 0 0 nan\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    with pytest.raises(
        AssetValidationError, match=r"^m: mesh has non-finite vertex coordinates \(nan/inf\)$"
    ):
        load_mesh_arrays(path, path.read_bytes(), label="m")
    big = tmp_path / "big.obj"
    big.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\nf 1 3 2\n")
    with pytest.raises(MeshTooLarge):
        load_mesh_arrays(big, big.read_bytes(), label="m", limits=MeshLimits(max_mesh_faces=1))
