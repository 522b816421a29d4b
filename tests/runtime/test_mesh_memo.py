"""Mesh results are remembered by the bytes they come from: copies of one file in different
deployments are parsed once, a file whose bytes change is parsed again (even with its size and
times put back), failures are never remembered, and what is shared cannot be written to."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import trimesh

from runtime.sim import mesh_memo
from runtime.sim.errors import SceneBuildError
from runtime.sim.geometry import package_geometry
from tests.runtime.sim_fixtures import block


@pytest.fixture(autouse=True)
def _fresh_memo() -> None:
    mesh_memo.forget_all()


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every mesh trimesh parses (the file it came from)."""
    seen: list[str] = []
    real = mesh_memo.load_mesh_bytes

    def counted(path: Path, data: bytes | None) -> trimesh.Trimesh:
        seen.append(path.name)
        return real(path, data)

    monkeypatch.setattr(mesh_memo, "load_mesh_bytes", counted)
    return seen


def _package(root: Path, extents: tuple[float, float, float] = (0.04, 0.05, 0.06)) -> Path:
    return root / block(root, "block", extents)


def test_a_copy_of_the_same_bytes_elsewhere_is_not_parsed_again(
    tmp_path: Path, parses: list[str]
) -> None:
    first = package_geometry("item", _package(tmp_path / "a"), 1000.0)
    parsed_once = len(parses)
    assert parsed_once >= 1
    second = package_geometry("item", _package(tmp_path / "b"), 1000.0)
    assert len(parses) == parsed_once
    assert second.identity == first.identity and second.mass == first.mass
    for a, b in zip(first.pieces, second.pieces, strict=True):
        assert np.array_equal(a.vertices, b.vertices) and a.volume == b.volume


def test_changed_bytes_are_parsed_again_even_with_size_and_times_put_back(
    tmp_path: Path, parses: list[str]
) -> None:
    catalog = _package(tmp_path / "a", extents=(0.04, 0.05, 0.06))
    before = package_geometry("item", catalog, 1000.0)
    piece = catalog.parent / ".assetcast" / "collision" / "piece_000.obj"
    status = piece.stat()
    text = piece.read_text()
    # Same length, other numbers: the box's top at z = 0.12 instead of 0.06, twice as tall.
    changed = text.replace("0.06000000", "0.12000000")
    assert changed != text and len(changed) == len(text)
    piece.write_text(changed)
    os.utime(piece, ns=(status.st_atime_ns, status.st_mtime_ns))
    parsed = len(parses)
    after = package_geometry("item", catalog, 1000.0)
    assert len(parses) == parsed + 1
    assert after.pieces[0].volume == pytest.approx(2 * before.pieces[0].volume)


def test_a_broken_mesh_fails_every_time_naming_its_own_file(tmp_path: Path) -> None:
    for name in ("a", "b"):
        catalog = _package(tmp_path / name)
        piece = catalog.parent / ".assetcast" / "collision" / "piece_000.obj"
        piece.write_text("v 0 0 0\nv 1 0 0\nf 1 2 2\n")
        with pytest.raises(SceneBuildError) as raised:
            package_geometry("item", catalog, 1000.0)
        assert str(piece) in str(raised.value)


def test_shared_pieces_are_read_only(tmp_path: Path) -> None:
    geometry = package_geometry("item", _package(tmp_path / "a"), 1000.0)
    with pytest.raises(ValueError, match="read-only"):
        geometry.pieces[0].vertices[0, 0] = 1.0
    again = package_geometry("item", _package(tmp_path / "b"), 1000.0)
    assert again.pieces[0].vertices is geometry.pieces[0].vertices


def test_formats_that_reference_other_files_are_parsed_from_their_path_each_time(
    tmp_path: Path, parses: list[str]
) -> None:
    mesh = trimesh.creation.box(extents=(0.04, 0.05, 0.06))
    files = mesh.export(file_type="gltf")  # model.gltf and the buffer file it names
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    path = tmp_path / "model.gltf"
    assert len(files) > 1 and path.is_file()
    for _ in range(2):
        volume = mesh_memo.derived("closed_volume", path, lambda m: float(m.volume),
                                   lambda _v: 64, {})
        assert volume == pytest.approx(0.04 * 0.05 * 0.06)
    assert parses == ["model.gltf", "model.gltf"]
