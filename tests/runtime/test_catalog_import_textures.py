"""``catalog import`` keeps what an asset looks like: UVs, normals, materials and textures of
a textured OBJ+MTL or GLB reach the package, and the camera loader still sees the texture."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import trimesh
from PIL import Image

from runtime.assets.demo_catalog import check_catalog
from runtime.assets.importing import ImportOptions, import_asset
from runtime.sim.cameras.visuals import load_visual_parts

PIXELS = (np.arange(8 * 8 * 3).reshape(8, 8, 3) * 5 % 256).astype(np.uint8)


def _textured_box() -> trimesh.Trimesh:
    box = trimesh.creation.box((0.04, 0.03, 0.02))
    box.unmerge_vertices()  # one vertex per face corner: UV seams, as exporters write
    uv = np.random.default_rng(3).random((len(box.vertices), 2))
    box.visual = trimesh.visual.TextureVisuals(uv=uv, image=Image.fromarray(PIXELS))
    return box


def _lines(path: Path, prefix: str) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith(prefix)]


def test_textured_obj_keeps_uvs_normals_material_and_texture(tmp_path: Path) -> None:
    source_dir = tmp_path / "src"
    source_dir.mkdir()
    box = _textured_box()
    box.export(source_dir / "crate.obj", include_normals=True)
    assert sorted(p.name for p in source_dir.iterdir()) == [
        "crate.obj", "material.mtl", "material_0.png"
    ]
    result = import_asset(
        source_dir / "crate.obj", tmp_path / "catalog", ImportOptions("crate", "crate")
    )
    package = result.package_dir
    assert sorted(p.name for p in package.iterdir()) == [
        "asset.catalog.json", "collision.obj", "material.mtl", "material_0.png", "mesh.obj"
    ]
    assert (package / "material_0.png").read_bytes() == (
        source_dir / "material_0.png"
    ).read_bytes()
    mesh = package / "mesh.obj"
    assert _lines(mesh, "mtllib") == ["mtllib material.mtl"]
    assert _lines(mesh, "usemtl") == ["usemtl material_0"]
    assert len(_lines(mesh, "vt ")) == len(box.vertices) == 36
    assert len(_lines(mesh, "vn ")) == 36
    assert _lines(mesh, "f ")[0].count("/") == 6  # v/vt/vn per corner
    manifest = json.loads((package / "asset.catalog.json").read_text())
    assert manifest["collision_path"] == "collision.obj"
    collision = trimesh.load(package / "collision.obj", force="mesh")
    assert len(collision.vertices) == 8 and collision.is_watertight  # welded for physics
    [part] = load_visual_parts(mesh, "obj-test")
    assert part.texture is not None and part.texcoords is not None
    assert np.array_equal(part.texture, PIXELS)
    read = trimesh.load(source_dir / "crate.obj", process=False)  # the UVs as the file says
    assert sorted(map(tuple, part.texcoords)) == sorted(map(tuple, read.visual.uv))
    results = check_catalog(tmp_path / "catalog")
    assert [r.ok for r in results] == [True], [r.reason for r in results]


def test_textured_glb_becomes_obj_mtl_png_with_its_texture(tmp_path: Path) -> None:
    box = _textured_box()
    source = tmp_path / "crate.glb"
    source.write_bytes(box.export(file_type="glb"))
    result = import_asset(source, tmp_path / "catalog", ImportOptions("crate", "crate"))
    package = result.package_dir
    assert sorted(p.name for p in package.iterdir()) == [
        "asset.catalog.json", "collision.obj", "material.mtl", "mesh.obj", "texture_000.png"
    ]
    assert (package / "material.mtl").read_text() == (
        "newmtl material_000\nKd 1 1 1\nmap_Kd texture_000.png\n"
    )
    assert np.array_equal(np.asarray(Image.open(package / "texture_000.png")), PIXELS)
    descriptor = result.descriptor
    assert descriptor.bounds_m is not None  # glTF is Y-up: the 0.03 side became the height
    assert np.allclose(descriptor.bounds_m.extents, [0.04, 0.02, 0.03])
    assert descriptor.provenance["materials"] == (
        "base colour and texture converted to material.mtl and PNG files"
    )
    [part] = load_visual_parts(package / "mesh.obj", "glb-test")
    assert part.texture is not None and np.array_equal(part.texture, PIXELS)
    assert part.texcoords is not None and len(part.texcoords) == 36
    results = check_catalog(tmp_path / "catalog")
    assert [r.ok for r in results] == [True], [r.reason for r in results]
    again = import_asset(source, tmp_path / "catalog", ImportOptions("crate", "crate"))
    assert again.written is False  # byte-deterministic


def test_a_plain_mesh_keeps_the_geometry_only_package(tmp_path: Path) -> None:
    source = tmp_path / "b.stl"
    trimesh.creation.box((0.02, 0.02, 0.02)).export(source)
    result = import_asset(source, tmp_path / "catalog", ImportOptions("b", "block"))
    assert sorted(p.name for p in result.package_dir.iterdir()) == [
        "asset.catalog.json", "mesh.obj"
    ]
    assert _lines(result.package_dir / "mesh.obj", "vt") == []


@pytest.mark.parametrize("colour", [(255, 0, 0, 255), (0, 128, 255, 128)])
def test_glb_base_colour_without_texture_becomes_kd(
    tmp_path: Path, colour: tuple[int, int, int, int]
) -> None:
    box = trimesh.creation.box((0.02, 0.02, 0.02))
    box.visual = trimesh.visual.TextureVisuals(
        material=trimesh.visual.material.PBRMaterial(baseColorFactor=colour)
    )
    source = tmp_path / "b.glb"
    source.write_bytes(box.export(file_type="glb"))
    result = import_asset(source, tmp_path / "catalog", ImportOptions("b", "block"))
    [part] = load_visual_parts(result.package_dir / "mesh.obj", f"kd-{colour}")
    assert part.texture is None
    assert part.rgba[:3] == pytest.approx(tuple(c / 255 for c in colour[:3]), abs=1e-6)
    mtl = (result.package_dir / "material.mtl").read_text().splitlines()
    assert mtl[0] == "newmtl material_000" and mtl[1].startswith("Kd ")
    assert mtl[2:] == ([] if colour[3] == 255 else [f"d {colour[3] / 255!r}"])


def test_glb_primitives_sharing_an_image_share_one_png(tmp_path: Path) -> None:
    left, right = _textured_box(), _textured_box()
    right.apply_translation([0.05, 0, 0])
    source = tmp_path / "pair.glb"
    source.write_bytes(trimesh.Scene([left, right]).export(file_type="glb"))
    result = import_asset(source, tmp_path / "catalog", ImportOptions("pair", "pair"))
    names = sorted(p.name for p in result.package_dir.iterdir())
    assert names == [
        "asset.catalog.json", "collision.obj", "material.mtl", "mesh.obj", "texture_000.png"
    ]
    assert _lines(result.package_dir / "mesh.obj", "usemtl") == [
        "usemtl material_000", "usemtl material_001"
    ]
    parts = load_visual_parts(result.package_dir / "mesh.obj", "pair")
    assert len(parts) == 2 and all(np.array_equal(p.texture, PIXELS) for p in parts)


def test_ply_vertex_colours_are_kept(tmp_path: Path) -> None:
    box = trimesh.creation.box((0.03, 0.03, 0.02))
    colours = np.tile([200, 30, 30, 255], (8, 1)).astype(np.uint8)
    colours[:4] = [20, 40, 220, 255]
    box.visual.vertex_colors = colours
    source = tmp_path / "scan.ply"
    box.export(source)
    result = import_asset(source, tmp_path / "catalog", ImportOptions("scan", "block"))
    package = result.package_dir
    assert sorted(p.name for p in package.iterdir()) == [
        "asset.catalog.json", "collision.obj", "mesh.obj"
    ]
    assert result.descriptor.provenance["materials"] == "vertex colours kept (v x y z r g b)"
    written = trimesh.load(package / "mesh.obj", process=False)
    assert written.visual.kind == "vertex"
    assert {tuple(c[:3]) for c in written.visual.vertex_colors.tolist()} == {
        (20, 40, 220), (200, 30, 30)
    }
    # The camera loader groups faces by colour: the faces wholly on one side keep it exactly.
    parts = load_visual_parts(package / "mesh.obj", "ply-colours")
    seen = {tuple(round(c * 255) for c in p.rgba[:3]) for p in parts}
    assert {(20, 40, 220), (200, 30, 30)} <= seen
    results = check_catalog(tmp_path / "catalog")
    assert [r.ok for r in results] == [True], [r.reason for r in results]


def _textured_obj(folder: Path, name: str, colour_shift: int = 0) -> None:
    """``folder/name.obj`` + ``material.mtl`` + ``material_0.png``, as trimesh exports them."""
    folder.mkdir(parents=True, exist_ok=True)
    box = _textured_box()
    pixels = ((PIXELS.astype(int) + colour_shift) % 256).astype(np.uint8)
    box.visual = trimesh.visual.TextureVisuals(uv=box.visual.uv, image=Image.fromarray(pixels))
    box.export(folder / f"{name}.obj", include_normals=True)


def test_urdf_visual_mesh_keeps_its_texture(tmp_path: Path) -> None:
    # pybullet's duck: a URDF whose visual is a scaled, rotated OBJ with an MTL and a texture.
    _textured_obj(tmp_path / "meshes", "duck")
    (tmp_path / "duck.urdf").write_text(
        '<robot name="duck"><link name="base">'
        '<visual><origin xyz="0 0 0.01" rpy="1.5707963267948966 0 0"/>'
        '<geometry><mesh filename="meshes/duck.obj" scale="2 2 2"/></geometry></visual>'
        '<collision><origin xyz="0 0 0.01" rpy="1.5707963267948966 0 0"/>'
        '<geometry><mesh filename="meshes/duck.obj" scale="2 2 2"/></geometry></collision>'
        "</link></robot>"
    )
    result = import_asset(tmp_path / "duck.urdf", tmp_path / "catalog",
                          ImportOptions("duck", "duck"))
    package = result.package_dir
    assert sorted(p.name for p in package.iterdir()) == [
        "asset.catalog.json", "collision.obj", "material.mtl", "material_0.png", "mesh.obj"
    ]
    assert (package / "material_0.png").read_bytes() == (
        tmp_path / "meshes" / "material_0.png"
    ).read_bytes()
    assert result.descriptor.provenance["materials"] == "carried from the visual mesh files"
    assert result.descriptor.bounds_m is not None  # 0.04 x 0.03 x 0.02 box, doubled, Rx(90)
    assert np.allclose(result.descriptor.bounds_m.extents, [0.08, 0.04, 0.06])
    [part] = load_visual_parts(package / "mesh.obj", "urdf-duck")
    assert part.texture is not None and np.array_equal(part.texture, PIXELS)
    results = check_catalog(tmp_path / "catalog")
    assert [r.ok for r in results] == [True], [r.reason for r in results]


def test_urdf_visual_meshes_whose_files_clash_stay_geometry_only(tmp_path: Path) -> None:
    _textured_obj(tmp_path / "a", "left")
    _textured_obj(tmp_path / "b", "right", colour_shift=40)  # another material_0.png
    (tmp_path / "pair.urdf").write_text(
        '<robot name="pair"><link name="base">'
        '<visual><geometry><mesh filename="a/left.obj"/></geometry></visual>'
        '<visual><origin xyz="0.05 0 0"/><geometry><mesh filename="b/right.obj"/></geometry>'
        "</visual></link></robot>"
    )
    result = import_asset(tmp_path / "pair.urdf", tmp_path / "catalog",
                          ImportOptions("pair", "pair"))
    assert sorted(p.name for p in result.package_dir.iterdir()) == [
        "asset.catalog.json", "mesh.obj"
    ]
    assert result.descriptor.provenance["visual_note"] == (
        "geometry only: right.obj needs the name(s) material_0.png, material_0 "
        "another visual mesh already uses"
    )
