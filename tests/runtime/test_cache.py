"""Materializing packages into the verified content-addressed cache."""

from __future__ import annotations

import base64
import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trimesh

from domain.assets import PreparationContext, PreparedAsset
from domain.canonical import canonical_json, sha256_hex, sha256_json
from domain.errors import AssetValidationError, SessionLost
from runtime.assets.cache import prepare_package
from runtime.assets.mesh_writers import obj_bytes
from runtime.assets.snapshot import read_snapshot, verify_prepared_asset

BOX = trimesh.creation.box(extents=[0.04, 0.04, 0.04])
BOX.apply_translation([0, 0, 0.02])


def descriptor(**changes: Any) -> dict[str, Any]:
    raw = {
        "asset_id": "box-40",
        "category": "block",
        "attributes": {},
        "capabilities": ["antipodal_grasp"],
        "bounds_m": {"lower": [-0.02, -0.02, 0.0], "upper": [0.02, 0.02, 0.04]},
        "container_region": None,
        "support_region": None,
        "provenance": {"source": "test", "pouring": None},
        "normalized": True,
    }
    raw.update(changes)
    return raw


def make_package(
    folder: Path,
    *,
    files: dict[str, bytes] | None = None,
    manifest: dict[str, Any] | None = None,
    visual: str = "mesh.obj",
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    content = {"mesh.obj": obj_bytes(BOX.vertices, BOX.faces)}
    content.update(files or {})
    for rel, data in content.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    doc = manifest or {"descriptor": descriptor(), "visual_path": visual, "collision_path": None}
    (folder / "asset.catalog.json").write_text(json.dumps(doc))
    return folder


def prepare(package: Path, cache: Path) -> PreparedAsset:
    return prepare_package(
        package, candidate_id=package.name, locator=str(package),
        context=PreparationContext(str(cache)),
    )


def test_snapshot_layout_and_digests(tmp_path: Path) -> None:
    package = make_package(tmp_path / "pkg", files={"notes/README.txt": b"unreferenced\n"})
    asset = prepare(package, tmp_path / "cache")
    snap = Path(asset.snapshot_dir)
    assert snap == tmp_path / "cache" / asset.content_sha256
    assert set(asset.files) == {"asset.catalog.json", "mesh.obj", "notes/README.txt"}
    assert asset.files["notes/README.txt"] == sha256_hex(b"unreferenced\n")
    assert (snap / "notes/README.txt").read_bytes() == b"unreferenced\n"
    expected = sha256_json({"descriptor": asset.descriptor.to_dict(), "files": dict(asset.files)})
    assert asset.content_sha256 == expected
    meta = json.loads((snap / ".assetcast/snapshot.json").read_text())
    assert (snap / ".assetcast/snapshot.json").read_text() == canonical_json(meta)
    assert meta["schema_version"] == 1 and meta["files"] == dict(asset.files)
    assert asset.collision_pieces == (".assetcast/collision/piece_000.obj",)
    piece = trimesh.load(snap / asset.collision_pieces[0], force="mesh")
    assert np.allclose(piece.bounds, BOX.bounds)
    assert read_snapshot(snap) == asset
    verify_prepared_asset(asset)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [asset.content_sha256]


def test_same_bytes_elsewhere_same_identity_one_byte_changes_it(tmp_path: Path) -> None:
    first = prepare(make_package(tmp_path / "a"), tmp_path / "cache")
    copy = tmp_path / "elsewhere" / "b"
    shutil.copytree(tmp_path / "a", copy)
    second = prepare(copy, tmp_path / "cache")
    assert second.content_sha256 == first.content_sha256
    assert second.snapshot_dir == first.snapshot_dir
    mesh = copy / "mesh.obj"
    mesh.write_bytes(mesh.read_bytes() + b"\n")
    third = prepare(copy, tmp_path / "cache")
    assert third.content_sha256 != first.content_sha256
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_second_materialize_reuses_verified_snapshot(tmp_path: Path) -> None:
    package = make_package(tmp_path / "pkg")
    asset = prepare(package, tmp_path / "cache")
    stamp = os.stat(Path(asset.snapshot_dir) / ".assetcast/snapshot.json").st_mtime_ns
    again = prepare(package, tmp_path / "cache")
    assert again == asset
    assert os.stat(Path(asset.snapshot_dir) / ".assetcast/snapshot.json").st_mtime_ns == stamp


def test_tampered_cache_file_is_rejected_and_kept(tmp_path: Path) -> None:
    package = make_package(tmp_path / "pkg")
    asset = prepare(package, tmp_path / "cache")
    mesh = Path(asset.snapshot_dir) / "mesh.obj"
    mesh.write_bytes(mesh.read_bytes().replace(b"0.02", b"0.03", 1))
    with pytest.raises(AssetValidationError, match=r"mesh\.obj: content does not match its record"):
        verify_prepared_asset(asset)
    with pytest.raises(AssetValidationError, match=r"mesh\.obj: content does not match") as err:
        prepare(package, tmp_path / "cache")
    assert any("kept as evidence" in note for note in err.value.__notes__)
    assert mesh.exists()


def test_tampered_collision_piece_is_rejected(tmp_path: Path) -> None:
    asset = prepare(make_package(tmp_path / "pkg"), tmp_path / "cache")
    piece = Path(asset.snapshot_dir) / asset.collision_pieces[0]
    piece.write_bytes(piece.read_bytes() + b"# edited\n")
    with pytest.raises(AssetValidationError, match=r"piece_000\.obj: content does not match"):
        verify_prepared_asset(read_snapshot(asset.snapshot_dir))


def test_extra_file_in_snapshot_is_rejected(tmp_path: Path) -> None:
    asset = prepare(make_package(tmp_path / "pkg"), tmp_path / "cache")
    (Path(asset.snapshot_dir) / "extra.bin").write_bytes(b"x")
    with pytest.raises(AssetValidationError, match=r"extra\.bin: file is not recorded"):
        verify_prepared_asset(asset)


def test_tampered_snapshot_json_is_rejected(tmp_path: Path) -> None:
    package = make_package(tmp_path / "pkg")
    asset = prepare(package, tmp_path / "cache")
    meta_path = Path(asset.snapshot_dir) / ".assetcast/snapshot.json"
    meta = json.loads(meta_path.read_text())
    meta["descriptor"]["category"] = "cube"
    meta_path.write_text(canonical_json(meta))
    # The in-memory record no longer matches the bytes on disk...
    with pytest.raises(AssetValidationError, match=r"snapshot\.json: does not match the prepared"):
        verify_prepared_asset(asset)
    # ...and the edited metadata is inconsistent with its own digest.
    with pytest.raises(AssetValidationError, match=r"snapshot\.json: content_sha256 does not"):
        verify_prepared_asset(read_snapshot(asset.snapshot_dir))
    with pytest.raises(AssetValidationError, match=r"snapshot\.json: content_sha256 does not"):
        prepare(package, tmp_path / "cache")
    assert meta_path.exists()


def test_snapshot_json_reformatted_or_pieces_edited(tmp_path: Path) -> None:
    asset = prepare(make_package(tmp_path / "pkg"), tmp_path / "cache")
    meta_path = Path(asset.snapshot_dir) / ".assetcast/snapshot.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps(meta, indent=1))
    with pytest.raises(AssetValidationError, match=r"snapshot\.json: does not match the prepared"):
        verify_prepared_asset(read_snapshot(asset.snapshot_dir))
    meta["derived_files"] = {}
    meta_path.write_text(canonical_json(meta))
    with pytest.raises(AssetValidationError, match=r"snapshot\.json: collision_pieces are not all"):
        verify_prepared_asset(read_snapshot(asset.snapshot_dir))
    meta_path.write_text("{")
    with pytest.raises(AssetValidationError, match=r"snapshot\.json: invalid JSON"):
        read_snapshot(asset.snapshot_dir)


def _reject(tmp_path: Path, match: str, **kwargs: Any) -> None:
    package = make_package(tmp_path / "pkg", **kwargs)
    with pytest.raises(AssetValidationError, match=match):
        prepare(package, tmp_path / "cache")
    leftovers = list((tmp_path / "cache").iterdir()) if (tmp_path / "cache").exists() else []
    assert leftovers == []


def test_symlink_anywhere_is_rejected(tmp_path: Path) -> None:
    package = make_package(tmp_path / "pkg")
    (tmp_path / "outside.txt").write_text("secret")
    (package / "sub").mkdir()
    os.symlink(tmp_path / "outside.txt", package / "sub" / "link.txt")
    with pytest.raises(AssetValidationError, match=r"sub/link\.txt: symlinks are not allowed"):
        prepare(package, tmp_path / "cache")


def test_parent_escape_in_mtl_texture(tmp_path: Path) -> None:
    (tmp_path / "tex.png").write_bytes(b"png")
    mesh = b"mtllib mesh.mtl\n" + obj_bytes(BOX.vertices, BOX.faces)
    _reject(
        tmp_path,
        r"pkg/mesh\.mtl:2: map_Kd: path '\.\./tex\.png' escapes the package",
        files={"mesh.obj": mesh, "mesh.mtl": b"newmtl a\nmap_Kd -s 1 1 1 ../tex.png\n"},
    )


def test_absolute_mtllib(tmp_path: Path) -> None:
    mesh = b"mtllib /etc/passwd\n" + obj_bytes(BOX.vertices, BOX.faces)
    _reject(
        tmp_path, r"pkg/mesh\.obj:1: mtllib: absolute path '/etc/passwd'", files={"mesh.obj": mesh}
    )


def test_missing_referenced_file(tmp_path: Path) -> None:
    mesh = b"mtllib gone.mtl\n" + obj_bytes(BOX.vertices, BOX.faces)
    _reject(tmp_path, r"mesh\.obj:1: mtllib: referenced file 'gone\.mtl' is missing",
            files={"mesh.obj": mesh})


def test_missing_visual_mesh(tmp_path: Path) -> None:
    _reject(tmp_path, r"nothere\.obj: mesh file is missing from the package", visual="nothere.obj")


def test_unsupported_format_and_absolute_visual_path(tmp_path: Path) -> None:
    _reject(tmp_path, r"visual_path: unsupported mesh format '\.dae'", visual="mesh.dae")
    _reject(tmp_path, r"visual_path: absolute path '/tmp/mesh\.obj'", visual="/tmp/mesh.obj")


def test_bounds_mismatch(tmp_path: Path) -> None:
    bad = descriptor(bounds_m={"lower": [-0.02, -0.02, 0.0], "upper": [0.02, 0.02, 0.05]})
    _reject(
        tmp_path,
        r"pkg/mesh\.obj: descriptor\.bounds_m does not match the visual mesh bounds",
        manifest={"descriptor": bad, "visual_path": "mesh.obj", "collision_path": None},
    )


def test_nan_and_overflow_in_descriptor(tmp_path: Path) -> None:
    package = make_package(tmp_path / "pkg")
    text = (package / "asset.catalog.json").read_text()
    (package / "asset.catalog.json").write_text(text.replace("0.04]", "NaN]"))
    with pytest.raises(AssetValidationError, match=r"asset\.catalog\.json: invalid JSON: non-fin"):
        prepare(package, tmp_path / "cache")
    (package / "asset.catalog.json").write_text(text.replace("0.04]", "1e999]"))
    with pytest.raises(
        AssetValidationError,
        match=r"asset\.catalog\.json: descriptor\.bounds_m\.upper\[2\]: must be finite",
    ):
        prepare(package, tmp_path / "cache")


def test_unknown_fields(tmp_path: Path) -> None:
    doc = {"descriptor": descriptor(), "visual_path": "mesh.obj", "collision_path": None}
    _reject(tmp_path / "a", r"asset\.catalog\.json: license: unknown field",
            manifest={**doc, "license": "x"})
    _reject(tmp_path / "b", r"asset\.catalog\.json: descriptor\.color: unknown field",
            manifest={**doc, "descriptor": descriptor(color="red")})


def test_reserved_folder_in_package(tmp_path: Path) -> None:
    _reject(tmp_path, r"\.assetcast: a package may not contain", files={".assetcast/x": b"1"})


def _gltf(uri: str) -> bytes:
    vertices = np.asarray(BOX.vertices, dtype="<f4")
    indices = np.asarray(BOX.faces, dtype="<u4").reshape(-1)
    blob = vertices.tobytes() + indices.tobytes()
    doc = {
        "asset": {"version": "2.0"},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1}]}],
        "accessors": [
            {"bufferView": 0, "componentType": 5126, "count": len(vertices), "type": "VEC3",
             "min": vertices.min(axis=0).tolist(), "max": vertices.max(axis=0).tolist()},
            {"bufferView": 1, "componentType": 5125, "count": len(indices), "type": "SCALAR"},
        ],
        "bufferViews": [
            {"buffer": 0, "byteOffset": 0, "byteLength": vertices.nbytes},
            {"buffer": 0, "byteOffset": vertices.nbytes, "byteLength": indices.nbytes},
        ],
        "buffers": [{"byteLength": len(blob), "uri": uri or (
            "data:application/octet-stream;base64," + base64.b64encode(blob).decode())}],
    }
    return json.dumps(doc).encode()


def _gltf_manifest() -> dict[str, Any]:
    lower = [float(np.float32(v)) for v in (-0.02, -0.02, 0.0)]
    upper = [float(np.float32(v)) for v in (0.02, 0.02, 0.04)]
    bounds = {"lower": lower, "upper": upper}
    return {"descriptor": descriptor(bounds_m=bounds), "visual_path": "mesh.gltf",
            "collision_path": None}


def test_gltf_data_uri_and_relative_buffer_accepted(tmp_path: Path) -> None:
    asset = prepare(
        make_package(tmp_path / "a", files={"mesh.gltf": _gltf("")}, manifest=_gltf_manifest()),
        tmp_path / "cache",
    )
    assert len(asset.collision_pieces) == 1
    blob = np.asarray(BOX.vertices, dtype="<f4").tobytes()
    blob += np.asarray(BOX.faces, dtype="<u4").tobytes()
    asset = prepare(
        make_package(
            tmp_path / "b",
            files={"mesh.gltf": _gltf("bin/data.bin"), "bin/data.bin": blob},
            manifest=_gltf_manifest(),
        ),
        tmp_path / "cache",
    )
    assert "bin/data.bin" in asset.files


def test_percent_encoded_escape_in_gltf(tmp_path: Path) -> None:
    (tmp_path / "x.bin").write_bytes(b"0")
    _reject(tmp_path, r"mesh\.gltf: buffers\[0\]\.uri: path '\.\./x\.bin' escapes the package",
            files={"mesh.gltf": _gltf("%2E%2E/x.bin")}, manifest=_gltf_manifest())


def test_url_in_gltf_buffer(tmp_path: Path) -> None:
    _reject(
        tmp_path,
        r"pkg/mesh\.gltf: buffers\[0\]\.uri: URLs are not allowed \('https://example\.com/b\.bin'\)",
        files={"mesh.gltf": _gltf("https://example.com/b.bin")},
        manifest=_gltf_manifest(),
    )


def test_url_in_glb_image(tmp_path: Path) -> None:
    doc = json.dumps({"asset": {"version": "2.0"}, "images": [{"uri": "file:///etc/x.png"}]})
    chunk = doc.encode() + b" " * (-len(doc) % 4)
    glb = struct.pack("<4sII", b"glTF", 2, 20 + len(chunk)) + struct.pack(
        "<I4s", len(chunk), b"JSON") + chunk
    manifest = {**_gltf_manifest(), "visual_path": "mesh.glb"}
    _reject(tmp_path, r"mesh\.glb: images\[0\]\.uri: URLs are not allowed",
            files={"mesh.glb": glb}, manifest=manifest)


def test_empty_or_garbage_mesh(tmp_path: Path) -> None:
    _reject(tmp_path / "a", r"pkg/mesh\.obj: (mesh is empty|file holds no triangle mesh)",
            files={"mesh.obj": b"# nothing\n"})
    _reject(tmp_path / "b", r"pkg/mesh\.stl: mesh could not be loaded|pkg/mesh\.stl: mesh is empty",
            files={"mesh.stl": b"\x00" * 10}, visual="mesh.stl")


def test_file_removed_from_snapshot_is_rejected(tmp_path: Path) -> None:
    asset = prepare(make_package(tmp_path / "pkg", files={"a.txt": b"a"}), tmp_path / "cache")
    (Path(asset.snapshot_dir) / "a.txt").unlink()
    with pytest.raises(AssetValidationError, match=r"a\.txt: file is missing from the snapshot"):
        verify_prepared_asset(asset)


def test_ply_texture_comment_must_stay_inside(tmp_path: Path) -> None:
    header = (
        b"ply\nformat ascii 1.0\ncomment TextureFile /home/x/tex.png\nelement vertex 3\n"
        b"property float x\nproperty float y\nproperty float z\nelement face 1\n"
        b"property list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n"
    )
    _reject(tmp_path, r"mesh\.ply:3: TextureFile: absolute path '/home/x/tex\.png'",
            files={"mesh.ply": header}, visual="mesh.ply")


def test_derived_pieces_are_deterministic(tmp_path: Path) -> None:
    package = make_package(tmp_path / "pkg")
    first = prepare(package, tmp_path / "cache1")
    second = prepare(package, tmp_path / "cache2")
    assert first.derived_files == second.derived_files
    assert first.snapshot_dict() == second.snapshot_dict()


def test_losing_a_preparation_race_reuses_the_winner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runtime.assets.cache as cache_module

    package = make_package(tmp_path / "pkg")
    real_build = cache_module._build
    calls: list[int] = []

    def build_then_lose(*args: Any, **kwargs: Any) -> PreparedAsset:
        asset = real_build(*args, **kwargs)
        if not calls:
            calls.append(1)
            prepare(package, tmp_path / "cache")  # a concurrent preparer finishes first
        return asset

    monkeypatch.setattr(cache_module, "_build", build_then_lose)
    asset = prepare(package, tmp_path / "cache")
    verify_prepared_asset(asset)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [asset.content_sha256]


class Fence:
    """A session stand-in: ``lost`` makes its check raise, as a taken-over session's does."""

    tag = "0123456789ab.7"

    def __init__(self, lost: bool = False) -> None:
        self.lost, self.checks = lost, 0

    def check(self) -> None:
        self.checks += 1
        if self.lost:
            raise SessionLost("lease of '0123456789ab' (token 7) was lost")


def test_a_staged_folder_damaged_before_publishing_is_never_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone deletes a file in the temporary folder after it was built (what a resumer
    that wrongly cleaned it up did): the re-verification right before the rename refuses."""
    import runtime.assets.cache as cache_module

    real_build = cache_module._build

    def build_then_damage(tmp: Path, *args: Any, **kwargs: Any) -> PreparedAsset:
        asset = real_build(tmp, *args, **kwargs)
        (tmp / "mesh.obj").unlink()
        return asset

    monkeypatch.setattr(cache_module, "_build", build_then_damage)
    fence = Fence()
    with pytest.raises(AssetValidationError, match=r"mesh.obj: file is missing") as refused:
        prepare_package(
            make_package(tmp_path / "pkg"), candidate_id="c", locator="l",
            context=PreparationContext(str(tmp_path / "cache"), fence=fence),
        )
    assert "was not published" in "".join(refused.value.__notes__)
    assert list((tmp_path / "cache").iterdir()) == []  # no digest folder, no temp folder
    assert fence.checks == 0


def test_a_lost_session_publishes_no_snapshot(tmp_path: Path) -> None:
    fence = Fence(lost=True)
    with pytest.raises(SessionLost):
        prepare_package(
            make_package(tmp_path / "pkg"), candidate_id="c", locator="l",
            context=PreparationContext(str(tmp_path / "cache"), fence=fence),
        )
    assert fence.checks == 1
    assert list((tmp_path / "cache").iterdir()) == []


def _staged(tmp_path: Path, count: int) -> list[tuple[PreparedAsset, str]]:
    """``count`` distinct packages staged as a preparation worker stages them."""
    staged = []
    for index in range(count):
        folders: list[str] = []
        manifest = json.loads((make_package(tmp_path / f"pkg{index}") /
                               "asset.catalog.json").read_text())
        manifest["descriptor"]["asset_id"] = f"box-{index}"
        (tmp_path / f"pkg{index}" / "asset.catalog.json").write_text(json.dumps(manifest))
        asset = prepare_package(
            tmp_path / f"pkg{index}", candidate_id=f"c{index}", locator="l",
            context=PreparationContext(str(tmp_path / "cache"), staging=folders),
        )
        staged.append((asset, folders[0]))
    return staged


def test_a_staged_batch_is_fenced_once_right_before_its_renames(tmp_path: Path) -> None:
    from runtime.assets.cache import publish_staged

    staged = _staged(tmp_path, 3)
    (Path(staged[1][1]) / "mesh.obj").write_bytes(b"changed after staging")
    fence = Fence()
    results = publish_staged(staged, PreparationContext(str(tmp_path / "cache"), fence=fence))
    assert fence.checks == 1
    assert isinstance(results[1], AssetValidationError)
    for asset in (results[0], results[2]):
        assert isinstance(asset, PreparedAsset)
        verify_prepared_asset(asset)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        [results[0].content_sha256, results[2].content_sha256]  # type: ignore[union-attr]
    )


def test_a_lost_session_publishes_nothing_of_a_staged_batch(tmp_path: Path) -> None:
    from runtime.assets.cache import publish_staged

    staged = _staged(tmp_path, 3)
    with pytest.raises(SessionLost, match=r"was lost$"):
        publish_staged(staged, PreparationContext(str(tmp_path / "cache"),
                                                  fence=Fence(lost=True)))
    assert list((tmp_path / "cache").iterdir()) == []  # no snapshot, no temp folder left


def test_a_fenced_snapshot_names_its_temp_folder_after_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    real_rename = os.rename

    def rename(src: Any, dst: Any) -> None:
        seen.append(Path(src).name)
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    prepare_package(
        make_package(tmp_path / "pkg"), candidate_id="c", locator="l",
        context=PreparationContext(str(tmp_path / "cache"), fence=Fence()),
    )
    assert len(seen) == 1 and seen[0].startswith(".tmp-0123456789ab.7-")


def test_physics_is_part_of_the_content_identity(tmp_path: Path) -> None:
    plain = prepare(make_package(tmp_path / "plain"), tmp_path / "cache")
    heavy_manifest = {
        "descriptor": descriptor(physics={"mass_kg": 0.5}),
        "visual_path": "mesh.obj", "collision_path": None,
    }
    heavy = prepare(make_package(tmp_path / "heavy", manifest=heavy_manifest), tmp_path / "cache")
    heavier_manifest = {
        "descriptor": descriptor(physics={"mass_kg": 0.6}), "visual_path": "mesh.obj",
        "collision_path": None,
    }
    heavier = prepare(
        make_package(tmp_path / "heavier", manifest=heavier_manifest), tmp_path / "cache"
    )
    assert len({plain.content_sha256, heavy.content_sha256, heavier.content_sha256}) == 3
    assert heavy.descriptor.physics is not None and heavy.descriptor.physics.mass_kg == 0.5
    assert read_snapshot(Path(heavy.snapshot_dir)).descriptor == heavy.descriptor
    assert "physics" not in plain.descriptor.to_dict()  # older packages keep their identity


def test_bad_physics_names_the_field_and_the_file(tmp_path: Path) -> None:
    manifest = {
        "descriptor": descriptor(physics={"friction": {"sliding": -1}}),
        "visual_path": "mesh.obj", "collision_path": None,
    }
    package = make_package(tmp_path / "bad", manifest=manifest)
    with pytest.raises(AssetValidationError) as caught:
        prepare(package, tmp_path / "cache")
    assert str(caught.value) == (
        f"{package / 'asset.catalog.json'}: descriptor.physics.friction.sliding: must be "
        "positive, got -1"
    )
