"""Every input is bounded before it is read: non-regular files, sizes, mesh counts, nesting,
non-finite vertices. Each test is a real attack (a FIFO, a device node, a lying header)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
from pathlib import Path

import numpy as np
import pytest
import trimesh

from domain.assets import PreparationContext
from domain.config import CollectionConfig
from domain.errors import AssetValidationError, ConfigError
from domain.limits import MeshLimits, MeshTooLarge
from runtime.assets.cache import prepare_package
from runtime.assets.mesh_writers import obj_bytes
from runtime.assets.package import read_manifest
from runtime.assets.providers import DirectoryAssetProvider, ExplicitAssetProvider
from runtime.cli import main
from runtime.inputs.reading import read_bounded, read_inside
from runtime.prepare import prepare
from runtime.taskfile import MAX_TASK_DEPTH, load_task
from store import EventStore, InMemoryEventStore
from tests.runtime.hostile_support import (
    BOX,
    binary_stl,
    can_mknod,
    descriptor,
    run_cli,
    small_catalog,
    task_file,
    write_package,
)

BOX_TRIANGLES = np.asarray(
    trimesh.creation.box(extents=[0.04, 0.04, 0.04]).triangles + [0, 0, 0.02]
)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_catalog(tmp_path_factory.mktemp("bounds"))


def _prepare_file(package: Path, tmp_path: Path, **limits: int) -> None:
    context = PreparationContext(str(tmp_path / "cache"), MeshLimits(**limits))
    prepare_package(package, candidate_id="x", locator=str(package), context=context)


# ------------------------------------------------------------- non-regular files


def test_fifo_catalog_file_is_a_recorded_rejection_not_a_hang(
    catalog: Path, tmp_path: Path
) -> None:
    hostile = tmp_path / "catalog"
    shutil.copytree(catalog, hostile)
    fifo_package = hostile / "fifo-block"
    fifo_package.mkdir()
    (fifo_package / "mesh.obj").write_bytes(b"v 0 0 0\n")
    os.mkfifo(fifo_package / "asset.catalog.json")
    result = run_cli(
        "prepare", str(task_file(tmp_path)), "--catalog", f"item={hostile}",
        "--catalog", f"bin={hostile}", "--out", str(tmp_path / "out"), cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    store = EventStore(f"sqlite:///{tmp_path / 'a.db'}")
    [run] = store.list_runs()
    rejected = [
        e.payload for e in store.read(run.run_id)
        if e.type == "CandidateRejected" and e.payload["candidate_id"] == "fifo-block"
    ]
    assert [(r["role"], r["error_type"], r["detail"]) for r in rejected] == [
        (role, "AssetValidationError",
         f"{fifo_package / 'asset.catalog.json'}: is a FIFO, not a regular file")
        for role in ("bin", "item")
    ]


def test_fifo_task_file_is_refused_in_one_line(catalog: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "task.yaml"
    os.mkfifo(fifo)
    result = run_cli(
        "prepare", str(fifo), "--catalog", f"item={catalog}", "--catalog", f"bin={catalog}",
        "--out", str(tmp_path / "out"), cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr == f"assetcast: error: {fifo}: task file is a FIFO, not a regular file\n"
    assert not (tmp_path / "out").exists() and not (tmp_path / "a.db").exists()


def test_fifo_mesh_fails_catalog_check(tmp_path: Path) -> None:
    package = write_package(tmp_path / "cat" / "pkg")
    (package / "mesh.obj").unlink()
    os.mkfifo(package / "mesh.obj")
    result = run_cli("catalog", "check", str(tmp_path / "cat"), cwd=tmp_path)
    assert result.returncode == 2
    reason = f"{package / 'mesh.obj'}: is a FIFO, not a regular file"
    assert result.stdout == f"FAIL  {package}: {reason}\n"
    assert result.stderr == "assetcast: error: 1 of 1 package(s) failed\n"


def test_fifo_swapped_in_after_the_check_cannot_block_the_open(tmp_path: Path) -> None:
    """read_inside opens without a prior stat (as if the FIFO appeared after the listing):
    O_NONBLOCK returns at once and the descriptor's type is refused."""
    os.mkfifo(tmp_path / "asset.catalog.json")
    with pytest.raises(
        AssetValidationError,
        match=rf"^{tmp_path / 'asset.catalog.json'}: file is a FIFO, not a regular file$",
    ):
        read_inside(tmp_path, "asset.catalog.json", limit=1024, error=AssetValidationError)


@pytest.mark.skipif(not can_mknod(), reason="creating a character device needs root")
def test_character_device_catalog_file_is_refused(tmp_path: Path) -> None:
    package = write_package(tmp_path / "pkg")
    (package / "asset.catalog.json").unlink()
    os.mknod(package / "asset.catalog.json", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # zero
    with pytest.raises(
        AssetValidationError,
        match=rf"^{package / 'asset.catalog.json'}: file is a character device, not a regular",
    ):
        read_manifest(package)
    [listed] = DirectoryAssetProvider(tmp_path).candidates(None, 4)
    assert listed.descriptor is None and "character device" in (listed.listing_error or "")
    with pytest.raises(AssetValidationError, match="is a character device, not a regular file"):
        _prepare_file(package, tmp_path)


def test_device_behind_a_symlink_is_refused_as_a_symlink(tmp_path: Path) -> None:
    package = write_package(tmp_path / "pkg")
    (package / "asset.catalog.json").unlink()
    (package / "asset.catalog.json").symlink_to("/dev/zero")
    with pytest.raises(
        AssetValidationError,
        match=rf"^{package / 'asset.catalog.json'}: file is a symbolic link \(not allowed\)$",
    ):
        read_manifest(package)


def test_size_is_checked_before_reading(tmp_path: Path) -> None:
    sparse = tmp_path / "huge.json"
    with open(sparse, "wb") as handle:
        handle.truncate(10 << 30)  # 10 GiB, sparse: reading it would exhaust memory
    with pytest.raises(
        AssetValidationError, match=rf"^{sparse}: file is larger than 1048576 bytes$"
    ):
        read_bounded(sparse, limit=1 << 20, error=AssetValidationError)


# ------------------------------------------------------------------ mesh limits


def test_stl_header_claiming_millions_of_faces_is_a_recorded_rejection(
    catalog: Path, tmp_path: Path
) -> None:
    triangles = BOX_TRIANGLES
    big = write_package(
        tmp_path / "big-stl", mesh=binary_stl(triangles, claimed=5_000_000), visual="mesh.stl",
        manifest={"descriptor": descriptor(asset_id="big"), "visual_path": "mesh.stl"},
    )
    store = InMemoryEventStore()
    result = prepare(
        task_file(tmp_path),
        {
            "item": ExplicitAssetProvider([big, catalog / "block-040"]),
            "bin": DirectoryAssetProvider(catalog),
        },
        cfg=CollectionConfig(), output_dir=tmp_path / "out", store=store,
    )
    [rejected] = [e.payload for e in store.read(result.run_id) if e.type == "CandidateRejected"]
    assert rejected["error_type"] == "MeshTooLarge"
    assert rejected["detail"] == (
        f"mesh_too_large: {big / 'mesh.stl'} has 5000000 faces, limit 500000 (max_mesh_faces)"
    )
    assert not any(p.name.startswith(".tmp") for p in (tmp_path / "out" / "cache").iterdir())


def test_real_stl_over_a_configured_limit_names_the_limit(tmp_path: Path) -> None:
    sphere = trimesh.creation.icosphere(subdivisions=4, radius=0.02)  # 5120 faces
    sphere.apply_translation([0, 0, 0.02])
    lo, hi = sphere.bounds
    package = write_package(
        tmp_path / "sphere", mesh=binary_stl(np.asarray(sphere.triangles)), visual="mesh.stl",
        manifest={
            "descriptor": descriptor(bounds_m={"lower": lo.tolist(), "upper": hi.tolist()}),
            "visual_path": "mesh.stl",
        },
    )
    with pytest.raises(
        MeshTooLarge,
        match=rf"^mesh_too_large: {package / 'mesh.stl'} has 5120 faces, limit 1000 "
        r"\(max_mesh_faces\)$",
    ):
        _prepare_file(package, tmp_path, max_mesh_faces=1000)
    _prepare_file(package, tmp_path, max_mesh_faces=5120)  # at the limit is fine


def test_ply_header_counts_are_checked_before_loading(tmp_path: Path) -> None:
    header = b"ply\nformat binary_little_endian 1.0\nelement vertex 2000000\n" \
        b"property float x\nproperty float y\nproperty float z\nend_header\n"
    package = write_package(tmp_path / "ply", mesh=header, visual="mesh.ply", manifest={
        "descriptor": descriptor(), "visual_path": "mesh.ply"})
    with pytest.raises(
        MeshTooLarge,
        match=rf"^mesh_too_large: {package / 'mesh.ply'} has 2000000 vertices, limit 1500000 "
        r"\(max_mesh_vertices\)$",
    ):
        _prepare_file(package, tmp_path)


def test_gltf_faces_count_every_node_that_instances_a_mesh(tmp_path: Path) -> None:
    doc = {
        "asset": {"version": "2.0"},
        "accessors": [{"count": 3000, "componentType": 5126, "type": "VEC3"},
                      {"count": 3000, "componentType": 5125, "type": "SCALAR"}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1}]}],
        "nodes": [{"mesh": 0} for _ in range(1000)],  # 1000 x 1000 faces
        "scenes": [{"nodes": list(range(1000))}],
    }
    package = write_package(tmp_path / "gltf", mesh=json.dumps(doc).encode(),
                            visual="mesh.gltf",
                            manifest={"descriptor": descriptor(), "visual_path": "mesh.gltf"})
    with pytest.raises(
        MeshTooLarge,
        match=rf"^mesh_too_large: {package / 'mesh.gltf'} has 1000000 faces, limit 500000",
    ):
        _prepare_file(package, tmp_path)


def test_obj_polygons_count_as_their_triangles(tmp_path: Path) -> None:
    ring = np.c_[np.cos(np.linspace(0, 6, 3000)), np.sin(np.linspace(0, 6, 3000)), np.zeros(3000)]
    text = "".join(f"v {x:.4f} {y:.4f} {z}\n" for x, y, z in ring * 0.02)
    text += "f " + " ".join(str(i) for i in range(1, 3001)) + "\n"  # one face, 2998 triangles
    package = write_package(tmp_path / "poly", mesh=text.encode())
    with pytest.raises(MeshTooLarge, match=r"has 2998 faces, limit 1000 \(max_mesh_faces\)$"):
        _prepare_file(package, tmp_path, max_mesh_faces=1000)


def test_too_many_collision_pieces_collapse_to_one_hull(tmp_path: Path) -> None:
    boxes = [trimesh.creation.box(extents=[0.01, 0.01, 0.01]) for _ in range(3)]
    for i, box in enumerate(boxes):
        box.apply_translation([0.02 * (i - 1), 0, 0.005])
    mesh = trimesh.util.concatenate(boxes)
    lo, hi = mesh.bounds
    manifest = {"descriptor": descriptor(bounds_m={"lower": lo.tolist(), "upper": hi.tolist()}),
                "visual_path": "mesh.obj"}
    package = write_package(tmp_path / "three", mesh=obj_bytes(mesh.vertices, mesh.faces),
                            manifest=manifest)
    for limit, pieces in ((3, 3), (2, 1)):
        context = PreparationContext(
            str(tmp_path / f"cache{limit}"), MeshLimits(max_collision_pieces=limit)
        )
        asset = prepare_package(package, candidate_id="x", locator="x", context=context)
        assert len(asset.collision_pieces) == pieces


# -------------------------------------------------------------- nesting and NaN


def test_deeply_nested_yaml_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "task.yaml"
    path.write_text("task_id: " + "[" * 500 + "]" * 500 + "\n")
    with pytest.raises(
        ConfigError,
        match=rf"^{path}: line 1, column {9 + MAX_TASK_DEPTH}: invalid YAML: nested more than "
        rf"{MAX_TASK_DEPTH} levels deep$",
    ):
        load_task(path)
    block = "".join(f"{'  ' * i}k{i}:\n" for i in range(500)) + "  " * 500 + "x: 1\n"
    path.write_text(block)
    with pytest.raises(ConfigError, match=r"invalid YAML: nested more than 32 levels deep$"):
        load_task(path)
    assert main(["prepare", str(path), "--catalog", "item=x", "--out", str(tmp_path / "o"),
                 "--db", f"sqlite:///{tmp_path / 'a.db'}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested more than 32 levels deep" in err
    assert not (tmp_path / "a.db").exists()


def test_deeply_nested_provenance_json_is_refused(tmp_path: Path) -> None:
    package = write_package(tmp_path / "deep")
    shallow = json.dumps({"descriptor": descriptor(provenance={"x": "HOLE"}),
                          "visual_path": "mesh.obj"})
    deep = '{"x":' * 1000 + "{}" + "}" * 1000  # json.dumps itself cannot nest this deep
    (package / "asset.catalog.json").write_text(shallow.replace('"HOLE"', deep))
    with pytest.raises(
        AssetValidationError,
        match=rf"^{package / 'asset.catalog.json'}: JSON is nested 1004 levels deep, limit 64$",
    ):
        read_manifest(package)
    with pytest.raises(AssetValidationError, match="JSON is nested 1004 levels deep, limit 64$"):
        _prepare_file(package, tmp_path)


def test_deeply_nested_glb_json_is_refused(tmp_path: Path) -> None:
    chunk = ('{"asset":{"version":"2.0"},"extras":' + "[" * 300 + "]" * 300 + "}").encode()
    chunk += b" " * (-len(chunk) % 4)
    glb = b"glTF" + struct.pack("<II", 2, 20 + len(chunk)) + struct.pack("<I", len(chunk))
    glb += b"JSON" + chunk
    package = write_package(tmp_path / "glb", mesh=glb, visual="mesh.glb",
                            manifest={"descriptor": descriptor(), "visual_path": "mesh.glb"})
    with pytest.raises(
        AssetValidationError,
        match=rf"^{package}/mesh\.glb: glTF: JSON is nested 301 levels deep, limit 64$",
    ):
        _prepare_file(package, tmp_path)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_obj_non_finite_vertices_are_rejected(tmp_path: Path, value: str) -> None:
    box = trimesh.creation.box(extents=[0.04, 0.04, 0.04])
    box.apply_translation([0, 0, 0.02])
    text = obj_bytes(box.vertices, box.faces).decode() + f"v {value} 0 0\nf 1 2 9\n"
    package = write_package(tmp_path / "nan", mesh=text.encode())
    with pytest.raises(
        AssetValidationError,
        match=rf"^{package / 'mesh.obj'}: mesh has non-finite vertex coordinates \(nan/inf\)$",
    ):
        _prepare_file(package, tmp_path)


def test_stl_non_finite_vertex_is_rejected(tmp_path: Path) -> None:
    triangles = BOX_TRIANGLES.copy()
    triangles[0, 0, 0] = np.nan
    package = write_package(tmp_path / "nan-stl", mesh=binary_stl(triangles), visual="mesh.stl",
                            manifest={"descriptor": descriptor(), "visual_path": "mesh.stl"})
    with pytest.raises(AssetValidationError, match=r"mesh\.stl: mesh has non-finite vertex"):
        _prepare_file(package, tmp_path)


def test_catalog_check_takes_the_limits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    package = write_package(tmp_path / "cat" / "box")  # 12 faces, 8 vertices
    assert main(["catalog", "check", str(tmp_path / "cat"), "--max-mesh-faces", "10"]) == 2
    assert capsys.readouterr().out == (
        f"FAIL  {package}: mesh_too_large: {package / 'mesh.obj'} has 12 faces, limit 10"
        " (max_mesh_faces)\n"
    )
    assert main(["catalog", "check", str(tmp_path / "cat"), "--max-mesh-faces", "12"]) == 0


def test_preparation_never_decodes_a_texture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A texture can be a decompression bomb (a tiny PNG declaring 100000 x 100000 pixels);
    preparation needs geometry only, so the loader never even resolves the material file
    (the references were already checked to stay inside the package)."""
    import zlib

    import trimesh.resolvers

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 6, 0, 0, 0)
    bomb = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
    bomb += chunk(b"IDAT", zlib.compress(b"\0" * 1024)) + chunk(b"IEND", b"")

    resolved: list[object] = []
    real_get = trimesh.resolvers.FilePathResolver.get

    def spy(self: object, name: str) -> bytes:  # the loader swallows errors: record instead
        resolved.append(name)
        return real_get(self, name)

    monkeypatch.setattr(trimesh.resolvers.FilePathResolver, "get", spy)
    text = "mtllib mesh.mtl\nusemtl skin\n" + obj_bytes(BOX.vertices, BOX.faces).decode()
    package = write_package(tmp_path / "textured", mesh=text.encode())
    (package / "mesh.mtl").write_text("newmtl skin\nmap_Kd bomb.png\n")
    (package / "bomb.png").write_bytes(bomb)
    _prepare_file(package, tmp_path)
    assert resolved == []


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([{"children": [1]}, {"children": [0], "mesh": 0}], "the node hierarchy has a cycle"),
        ([{"children": [2]}, {"children": [2]}, {"mesh": 0}],
         r"nodes\[2\] has more than one parent"),
    ],
)
def test_gltf_node_graph_that_would_repeat_geometry_is_refused(
    tmp_path: Path, nodes: list[dict[str, object]], message: str
) -> None:
    doc = {"asset": {"version": "2.0"}, "accessors": [{"count": 3}],
           "meshes": [{"primitives": [{"attributes": {"POSITION": 0}}]}], "nodes": nodes}
    package = write_package(tmp_path / "graph", mesh=json.dumps(doc).encode(),
                            visual="mesh.gltf",
                            manifest={"descriptor": descriptor(), "visual_path": "mesh.gltf"})
    with pytest.raises(AssetValidationError, match=rf"^{package}/mesh\.gltf: {message}$"):
        _prepare_file(package, tmp_path)


def test_oversized_gltf_json_is_refused_before_decoding(tmp_path: Path) -> None:
    filler = "[" + ",".join(["0"] * (9 << 20)) + "]"  # 18 MB of zeros: ~75 MB as Python list
    doc = '{"asset":{"version":"2.0"},"extras":' + filler + "}"
    package = write_package(tmp_path / "fat", mesh=doc.encode(), visual="mesh.gltf",
                            manifest={"descriptor": descriptor(), "visual_path": "mesh.gltf"})
    with pytest.raises(
        AssetValidationError, match=r"mesh\.gltf: glTF: JSON is larger than 16777216 bytes$"
    ):
        _prepare_file(package, tmp_path)
