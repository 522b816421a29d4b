"""``assetcast catalog import``: orientation, scale, welding, origin, estimated regions,
missing references; every imported package must pass ``catalog check`` (which prepares it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import trimesh

from domain.errors import AssetValidationError
from runtime.assets.demo_catalog import check_catalog
from runtime.assets.importing import ImportOptions, import_asset
from runtime.assets.meshes import load_mesh
from runtime.cli import main
from tests.cli_logging import reset_cli_logging  # noqa: F401 (autouse)

REPO = Path(__file__).resolve().parents[2]
CAVITY_R, WALL, FLOOR, HEIGHT = 0.035, 0.005, 0.005, 0.1


def _manifest(package: Path) -> dict:
    return json.loads((package / "asset.catalog.json").read_text())


def _assert_checks(catalog: Path) -> None:
    results = check_catalog(catalog)
    assert results and all(r.ok for r in results), [r.reason for r in results]


def _mug(offset: tuple[float, float, float]) -> trimesh.Trimesh:
    """An open-top mug: hollow cylinder with a floor, and a handle box on +X."""
    wall = trimesh.creation.annulus(
        r_min=CAVITY_R, r_max=CAVITY_R + WALL, height=HEIGHT, sections=48
    )
    wall.apply_translation([0, 0, HEIGHT / 2])
    floor = trimesh.creation.cylinder(radius=CAVITY_R, height=FLOOR, sections=48)
    floor.apply_translation([0, 0, FLOOR / 2])
    handle = trimesh.creation.box((0.03, 0.01, 0.06))
    handle.apply_translation([CAVITY_R + WALL + 0.015, 0, 0.05])
    mug = trimesh.util.concatenate([wall, floor, handle])
    mug.apply_translation(offset)
    return mug


def test_y_up_obj_with_scale_becomes_z_up_in_metres(tmp_path: Path) -> None:
    # A 20 x 60 x 40 mm box in millimetres, Y up: 60 mm is its height.
    box = trimesh.creation.box((20.0, 60.0, 40.0))
    box.apply_translation([100.0, 30.0, -7.0])
    source = tmp_path / "tall.obj"
    box.export(source)
    catalog = tmp_path / "catalog"
    assert main([
        "catalog", "import", str(source), "--out", str(catalog), "--id", "tall",
        "--category", "block", "--up", "y", "--scale", "0.001",
        "--capability", "antipodal_grasp", "--attribute", "colour=red",
        "--attribute", "mass_g=12", "--log-level", "warning",
    ]) == 0
    descriptor = _manifest(catalog / "tall")["descriptor"]
    assert np.allclose(descriptor["bounds_m"]["lower"], [-0.01, -0.02, 0.0])
    assert np.allclose(descriptor["bounds_m"]["upper"], [0.01, 0.02, 0.06])
    assert descriptor["normalized"] is True
    assert descriptor["attributes"] == {"colour": "red", "mass_g": 12}
    assert descriptor["provenance"]["transform"]["up"] == "y"
    assert descriptor["provenance"]["transform"]["up_from"] == "--up"
    _assert_checks(catalog)


def test_glb_is_y_up_by_specification(tmp_path: Path) -> None:
    box = trimesh.creation.box((0.02, 0.06, 0.04))
    source = tmp_path / "tall.glb"
    source.write_bytes(box.export(file_type="glb"))
    result = import_asset(source, tmp_path / "catalog", ImportOptions("tall", "block"))
    assert result.descriptor.bounds_m is not None
    assert np.allclose(result.descriptor.bounds_m.extents, [0.02, 0.04, 0.06])
    assert result.descriptor.provenance["transform"]["up_from"] == "glb specification"


def test_mug_container_region_is_inside_the_cavity_and_footprint_centres_the_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "mug.obj"
    _mug((0.3, 0.2, 0.1)).export(source)
    catalog = tmp_path / "catalog"
    assert main([
        "catalog", "import", str(source), "--out", str(catalog), "--id", "mug",
        "--category", "mug", "--capability", "container", "--centre", "footprint",
        "--container", "--pouring", "--log-level", "warning",
    ]) == 0
    assert "container_region (estimated)" in capsys.readouterr().out
    descriptor = _manifest(catalog / "mug")["descriptor"]
    # The cylinder's axis is the origin: the body spans +-(r + wall), the handle only +X.
    lower, upper = descriptor["bounds_m"]["lower"], descriptor["bounds_m"]["upper"]
    assert np.allclose([lower[0], lower[1], upper[1]], [-0.04, -0.04, 0.04], atol=1e-9)
    assert upper[0] == pytest.approx(0.07)
    region = descriptor["container_region"]
    lo, hi = np.array(region["lower"]), np.array(region["upper"])
    # Strictly inside the cavity: every corner within the inner radius, above the floor.
    corners_r = np.hypot([lo[0], hi[0]], [lo[1], hi[1]])
    assert (corners_r < CAVITY_R).all()
    assert lo[2] > FLOOR and hi[2] <= HEIGHT
    assert hi[0] - lo[0] > 0.04  # and not a token box: most of the inscribed square
    assert np.allclose((lo[:2] + hi[:2]) / 2, 0.0, atol=1e-9)
    estimated = descriptor["provenance"]["estimated"]["container_region"]
    assert estimated["estimated"] is True
    assert descriptor["provenance"]["origin"] == "footprint"
    pouring = descriptor["provenance"]["pouring"]
    assert CAVITY_R * np.cos(np.pi / 48) - 1e-6 <= pouring["opening_radius_m"] <= CAVITY_R
    assert pouring["mouth_radius_m"] == pouring["opening_radius_m"]
    assert pouring["evidence"].startswith("estimated by assetcast catalog import: ")
    _assert_checks(catalog)


def test_bbox_centring_of_the_mug_centres_the_box(tmp_path: Path) -> None:
    source = tmp_path / "mug.stl"
    _mug((0.0, 0.0, 0.0)).export(source)
    result = import_asset(source, tmp_path / "catalog", ImportOptions("mug", "mug"))
    bounds = result.descriptor.bounds_m
    assert bounds is not None
    assert bounds.lower[0] == pytest.approx(-bounds.upper[0])
    assert bounds.upper[0] == pytest.approx(0.055)


def test_open_box_is_not_a_container(tmp_path: Path) -> None:
    source = tmp_path / "block.obj"
    trimesh.creation.box((0.05, 0.05, 0.05)).export(source)
    with pytest.raises(Exception) as raised:
        import_asset(source, tmp_path / "c", ImportOptions("b", "block", container=True))
    assert type(raised.value).__name__ == "AssetValidationError"
    assert str(raised.value) == (
        "--container: the surface under the opening is 0 m below the rim: "
        "no cavity to hold anything"
    )


def test_support_region_on_a_flat_top(tmp_path: Path) -> None:
    source = tmp_path / "platform.ply"
    trimesh.creation.box((0.2, 0.1, 0.02)).export(source)
    result = import_asset(
        source, tmp_path / "catalog", ImportOptions("platform", "platform", support=True)
    )
    region = result.descriptor.support_region
    assert region is not None
    assert region.lower[2] == region.upper[2] == pytest.approx(0.02)
    assert np.allclose(region.lower[:2], [-0.099, -0.049])
    assert result.descriptor.provenance["estimated"]["support_region"]["estimated"] is True
    _assert_checks(tmp_path / "catalog")


def test_unwelded_cube_is_welded_and_watertight(tmp_path: Path) -> None:
    cube = trimesh.creation.box((0.05, 0.05, 0.05))
    # Six separate faces: every face has its own copies of its corner vertices.
    vertex_lines, face_lines = [], []
    for pair in np.asarray(cube.faces).reshape(6, 2, 3):
        for tri in pair:
            start = len(vertex_lines)
            vertex_lines.extend(
                f"v {float(x)!r} {float(y)!r} {float(z)!r}" for x, y, z in cube.vertices[tri]
            )
            face_lines.append(f"f {start + 1} {start + 2} {start + 3}")
    source = tmp_path / "jenga.obj"
    source.write_text("\n".join(vertex_lines + face_lines) + "\n")
    raw = trimesh.load(source, force="mesh", process=False)
    assert len(raw.vertices) == 36 and not raw.is_watertight
    catalog = tmp_path / "catalog"
    result = import_asset(source, catalog, ImportOptions("jenga", "block"))
    assert result.vertices == 8
    written = trimesh.load(catalog / "jenga" / "mesh.obj", force="mesh", process=False)
    assert len(written.vertices) == 8
    assert written.is_watertight and written.volume == pytest.approx(0.05**3)
    _assert_checks(catalog)


def test_missing_mtl_is_refused_with_its_line_or_dropped_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "lego.obj"
    body = trimesh.creation.box((0.03, 0.03, 0.02)).export(file_type="obj")
    source.write_text("mtllib lego.mtl\n" + body)
    argv = [
        "catalog", "import", str(source), "--out", str(tmp_path / "catalog"), "--id", "lego",
        "--category", "block", "--log-level", "warning",
    ]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"assetcast: error: {tmp_path}/lego.obj:1: mtllib: referenced file 'lego.mtl' is "
        "missing (--drop-missing-references removes the reference)\n"
    )
    assert not (tmp_path / "catalog" / "lego").exists()
    assert main([*argv, "--drop-missing-references"]) == 0
    assert "dropped missing reference 'lego.mtl'" in capsys.readouterr().out
    package = tmp_path / "catalog" / "lego"
    assert sorted(p.name for p in package.iterdir()) == ["asset.catalog.json", "mesh.obj"]
    assert b"mtllib" not in (package / "mesh.obj").read_bytes()
    provenance = _manifest(package)["descriptor"]["provenance"]
    assert provenance["dropped_references"] == [
        {"reference": "lego.mtl", "where": f"{tmp_path}/lego.obj:1: mtllib"}
    ]
    _assert_checks(tmp_path / "catalog")


def test_mtl_and_texture_are_carried_and_a_missing_texture_dropped(tmp_path: Path) -> None:
    source = tmp_path / "duck.obj"
    body = trimesh.creation.box((0.03, 0.03, 0.02)).export(file_type="obj")
    source.write_text("mtllib duck.mtl\n" + body)
    (tmp_path / "duck.mtl").write_text(
        "newmtl yellow\nKd 1 1 0\nmap_Kd tex/duck.png\nmap_Bump gone.png\n"
    )
    (tmp_path / "tex").mkdir()
    (tmp_path / "tex" / "duck.png").write_bytes(b"\x89PNG not really")
    catalog = tmp_path / "catalog"
    result = import_asset(
        source, catalog, ImportOptions("duck", "duck", drop_missing_references=True)
    )
    package = result.package_dir
    assert (package / "tex" / "duck.png").read_bytes() == b"\x89PNG not really"
    assert (package / "duck.mtl").read_text() == "newmtl yellow\nKd 1 1 0\nmap_Kd tex/duck.png\n"
    assert (package / "mesh.obj").read_text().startswith("mtllib duck.mtl\nusemtl yellow\n")
    _assert_checks(catalog)


def test_import_is_byte_deterministic_and_refuses_to_overwrite(tmp_path: Path) -> None:
    source = tmp_path / "mug.obj"
    _mug((0.01, 0.02, 0.03)).export(source)
    options = ImportOptions("mug", "mug", centring="footprint", container=True)
    first = import_asset(source, tmp_path / "a", options)
    second = import_asset(source, tmp_path / "b", options)
    for rel in ("asset.catalog.json", "mesh.obj"):
        assert (first.package_dir / rel).read_bytes() == (second.package_dir / rel).read_bytes()
    assert import_asset(source, tmp_path / "a", options).written is False
    other = ImportOptions("mug", "cup", centring="footprint", container=True)
    with pytest.raises(Exception) as raised:
        import_asset(source, tmp_path / "a", other)
    assert str(raised.value) == f"{tmp_path}/a/mug: already exists with different content"
    mesh = load_mesh(first.package_dir / "mesh.obj", label="mesh")
    assert mesh.bounds[0][2] == 0.0


def test_bad_id_and_scale_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "b.obj"
    trimesh.creation.box((0.05, 0.05, 0.05)).export(source)
    base = ["catalog", "import", str(source), "--out", str(tmp_path / "c"), "--category", "x"]
    assert main([*base, "--id", "../escape"]) == 2
    assert capsys.readouterr().err == (
        "assetcast: error: --id: '../escape' must be letters, digits, '.', '_' or '-' "
        "(it names the package folder)\n"
    )
    assert main([*base, "--id", "b", "--scale", "-1"]) == 2
    assert capsys.readouterr().err == (
        "assetcast: error: --scale: must be a positive number, got -1.0\n"
    )
    assert not (tmp_path / "c").exists()


def test_check_warns_about_unknown_capabilities_and_thin_shells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # pybullet's jenga block: six 0.5 mm plates around a hollow 5 cm cube.
    size, thin = 0.05, 0.0005
    plates = []
    for axis in range(3):
        for sign in (-1, 1):
            extents = [size - 4 * thin] * 3  # plates do not touch: six components
            extents[axis] = thin
            plate = trimesh.creation.box(extents)
            offset = [0.0, 0.0, 0.0]
            offset[axis] = sign * (size - thin) / 2
            plate.apply_translation(offset)
            plates.append(plate)
    source = tmp_path / "jenga.obj"
    trimesh.util.concatenate(plates).export(source)
    catalog = tmp_path / "catalog"
    import_asset(source, catalog, ImportOptions("jenga", "block", ("antipodal_grip",)))
    assert main(["catalog", "check", str(catalog), "--log-level", "warning"]) == 0
    lines = capsys.readouterr().out.splitlines()
    package = catalog / "jenga"
    assert lines[0].startswith(f"ok    {package}: jenga ")
    assert lines[1] == (
        f"warn  {package}: capability 'antipodal_grip' is not in the documented vocabulary "
        "(antipodal_grasp, container, support_surface, pour_source, pour_target, stackable); "
        "did you mean 'antipodal_grasp'?"
    )
    assert len(lines) == 8
    assert lines[2] == (
        f"warn  {package}: collision piece piece_000.obj is a thin shell (0.5 mm thick): the "
        "simulator collides it as a plate that thin, which fingers and objects can pass "
        "through or tunnel into; give the package a closed, solid collision mesh "
        "(`assetcast catalog import` welds separate faces into one)"
    )


def test_trimesh_runtime_warnings_become_debug_log_lines(tmp_path: Path) -> None:
    source = tmp_path / "mug.obj"
    # A zero-thickness coaster beside the mug: trimesh divides by its hull's zero volume.
    coaster = trimesh.Trimesh(
        [[0.1, 0.0, 0.0], [0.15, 0.0, 0.0], [0.15, 0.05, 0.0], [0.1, 0.05, 0.0]],
        [[0, 1, 2], [0, 2, 3]],
    )
    trimesh.util.concatenate([_mug((0.0, 0.0, 0.0)), coaster]).export(source)
    import_asset(source, tmp_path / "catalog", ImportOptions("mug", "mug"))
    base = [sys.executable, "-m", "runtime.cli", "catalog", "check", str(tmp_path / "catalog")]
    quiet = subprocess.run(base, capture_output=True, text=True, cwd=REPO, check=True)
    assert quiet.stderr == ""
    loud = subprocess.run(
        [*base, "--log-level", "debug"], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert "library_warning" in loud.stderr and "RuntimeWarning" in loud.stderr
    assert "center_mass = " not in loud.stderr  # not the raw two-line warning


def test_urdf_visual_and_collision_get_scale_and_origin_rpy(tmp_path: Path) -> None:
    # Visual: a 20 x 60 x 40 mm box in millimetres, turned +90 degrees about X by its origin
    # (60 mm becomes the height); collision: a URDF box of the same size at the same origin.
    trimesh.creation.box((20.0, 60.0, 40.0)).export(tmp_path / "part.obj")
    (tmp_path / "part.urdf").write_text(
        '<robot name="part"><link name="base">'
        '<visual><origin xyz="0.1 0 0.2" rpy="1.5707963267948966 0 0"/>'
        '<geometry><mesh filename="part.obj" scale="0.001 0.001 0.001"/></geometry></visual>'
        '<collision><origin xyz="0.1 0 0.2" rpy="0 0 0"/>'
        '<geometry><box size="0.02 0.04 0.06"/></geometry></collision>'
        "</link></robot>"
    )
    catalog = tmp_path / "catalog"
    result = import_asset(tmp_path / "part.urdf", catalog, ImportOptions("part", "block"))
    bounds = result.descriptor.bounds_m
    assert bounds is not None
    assert np.allclose(bounds.lower, [-0.01, -0.02, 0.0])
    assert np.allclose(bounds.upper, [0.01, 0.02, 0.06])
    manifest = _manifest(catalog / "part")
    assert manifest["collision_path"] == "collision.obj"
    collision = trimesh.load(catalog / "part" / "collision.obj", force="mesh", process=False)
    assert np.allclose(collision.bounds, [bounds.lower, bounds.upper])
    assert result.descriptor.provenance["transform"]["up_from"] == "URDF convention (z up)"
    _assert_checks(catalog)


def test_urdf_with_a_moving_joint_or_a_package_url_is_refused(tmp_path: Path) -> None:
    urdf = tmp_path / "arm.urdf"
    links = '<link name="l1"/><link name="l2"/><link name="l3"/>'
    fixed = '<joint name="j0" type="fixed"><parent link="l1"/><child link="l2"/></joint>'
    cases = [
        (f'<robot name="a">{links}{fixed}<joint name="elbow" type="revolute"><parent link="l2"/>'
         '<child link="l3"/></joint></robot>',
         "joint 'elbow' is 'revolute': only fixed joints are imported (an articulated object "
         "cannot be one rigid package)"),
        (f'<robot name="a">{links}{fixed}</robot>',
         "the links must form one tree (found 2 root links)"),
        (f'<robot name="a">{links}{fixed}<joint name="j1" type="fixed"><parent link="l3"/>'
         '<child link="l2"/></joint></robot>', "link 'l2' has two parent joints"),
        ('<robot name="a"><link name="l1"/><joint name="j" type="fixed"><parent link="l1"/>'
         '<child link="nope"/></joint></robot>',
         "joint 'j': parent and child must name links of this robot"),
        ('<robot name="a"><link name="l1"/><link name="l1"/></robot>',
         "every <link> needs a unique name"),
        ('<robot name="a"></robot>', "expected a <robot> with at least one <link>"),
    ]
    for text, message in cases:
        urdf.write_text(text)
        with pytest.raises(AssetValidationError) as raised:
            import_asset(urdf, tmp_path / "c", ImportOptions("arm", "arm"))
        assert str(raised.value) == f"{urdf}: {message}"
    urdf.write_text(
        '<robot name="a"><link name="l"><visual><geometry>'
        '<mesh filename="package://things/m.obj"/></geometry></visual></link></robot>'
    )
    with pytest.raises(Exception) as raised:
        import_asset(urdf, tmp_path / "c", ImportOptions("arm", "arm"))
    assert type(raised.value).__name__ == "AssetValidationError"
    assert str(raised.value) == (
        f"{urdf}: link 'l': visual[0]: mesh filename: URLs are not allowed "
        "('package://things/m.obj')"
    )
    assert not (tmp_path / "c").exists()


def test_multi_link_urdf_merges_fixed_links_through_their_joint_origins(
    tmp_path: Path,
) -> None:
    # A mug-like body (link "body", a 6 x 6 x 8 cm box) with a handle link (a 2 x 1 x 4 cm box)
    # fixed 4 cm off +X and 4 cm up, through a chain of two fixed joints with a yaw of 90
    # degrees on the first (the handle's own visual is turned back by its origin).
    trimesh.creation.box((0.06, 0.06, 0.08)).export(tmp_path / "body.obj")
    (tmp_path / "mug.urdf").write_text(
        '<robot name="mug">'
        '<link name="body"><visual><origin xyz="0 0 0.04"/><geometry>'
        '<mesh filename="body.obj"/></geometry></visual>'
        '<collision><origin xyz="0 0 0.04"/><geometry><box size="0.06 0.06 0.08"/></geometry>'
        '</collision></link>'
        '<link name="mount"/>'
        '<link name="handle"><visual><geometry><box size="0.02 0.01 0.04"/></geometry>'
        '</visual><collision><geometry><box size="0.02 0.01 0.04"/></geometry></collision>'
        '</link>'
        '<joint name="a" type="fixed"><parent link="body"/><child link="mount"/>'
        '<origin xyz="0 0 0.04" rpy="0 0 1.5707963267948966"/></joint>'
        '<joint name="b" type="fixed"><parent link="mount"/><child link="handle"/>'
        '<origin xyz="0 -0.04 0" rpy="0 0 -1.5707963267948966"/></joint>'
        "</robot>"
    )
    catalog = tmp_path / "catalog"
    result = import_asset(
        tmp_path / "mug.urdf", catalog, ImportOptions("mug", "mug", centring="footprint")
    )
    bounds = result.descriptor.bounds_m
    assert bounds is not None  # body x in [-0.03, 0.03]; handle centre at x = 0.04 +- 0.01
    assert np.allclose(bounds.lower, [-0.03, -0.03, 0.0], atol=1e-9)
    assert np.allclose(bounds.upper, [0.05, 0.03, 0.08], atol=1e-9)
    collision = trimesh.load(catalog / "mug" / "collision.obj", force="mesh", process=False)
    assert np.allclose(collision.bounds, [bounds.lower, bounds.upper], atol=1e-9)
    handle_corner = [0.05, 0.005, 0.06]  # the handle's top +X/+Y corner, in both meshes
    for mesh in (collision, trimesh.load(catalog / "mug" / "mesh.obj", force="mesh")):
        assert np.min(np.linalg.norm(mesh.vertices - handle_corner, axis=1)) < 1e-9
    _assert_checks(catalog)


def test_several_sources_import_one_package_each_named_after_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for index, name in enumerate(("b1.obj", "b2.stl")):
        trimesh.creation.box((0.02 + 0.01 * index,) * 3).export(tmp_path / name)
    (tmp_path / "broken.obj").write_text("mtllib gone.mtl\nv 0 0 0\n")
    catalog = tmp_path / "catalog"
    base = ["catalog", "import", "--out", str(catalog), "--category", "block",
            "--log-level", "warning"]
    capsys.readouterr()
    assert main([*base, str(tmp_path / "b1.obj"), str(tmp_path / "broken.obj"),
                 str(tmp_path / "b2.stl")]) == 2
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith(f"imported b1: {catalog / 'b1'} (12 faces, 0.02 x 0.02 x 0.02 m")
    assert lines[1] == (
        f"FAIL  {tmp_path / 'broken.obj'}: {tmp_path}/broken.obj: mesh is empty (no faces)"
    )
    assert lines[2].startswith(f"imported b2: {catalog / 'b2'} (12 faces, 0.03 x 0.03 x 0.03 m")
    assert captured.err == "assetcast: error: 1 of 3 source(s) failed\n"
    assert sorted(p.name for p in catalog.iterdir()) == ["b1", "b2"]
    _assert_checks(catalog)
    # One source needs no --id either; several sources refuse one --id, or two same names.
    assert main([*base, str(tmp_path / "b1.obj"), "--out", str(tmp_path / "one")]) == 0
    assert (tmp_path / "one" / "b1" / "asset.catalog.json").is_file()
    capsys.readouterr()
    assert main([*base, str(tmp_path / "b1.obj"), str(tmp_path / "b2.stl"), "--id", "x"]) == 2
    assert capsys.readouterr().err == (
        "assetcast: error: --id: names one package; with 2 sources each is named after its "
        "file\n"
    )
    (tmp_path / "sub").mkdir()
    trimesh.creation.box((0.02, 0.02, 0.02)).export(tmp_path / "sub" / "b1.obj")
    assert main([*base, str(tmp_path / "b1.obj"), str(tmp_path / "sub" / "b1.obj")]) == 2
    assert capsys.readouterr().err == (
        f"assetcast: error: --id: {tmp_path / 'b1.obj'} and {tmp_path / 'sub' / 'b1.obj'} "
        "would both be named 'b1'; import them separately with --id\n"
    )
