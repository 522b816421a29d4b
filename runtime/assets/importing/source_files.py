"""The files a source OBJ refers to (its MTL libraries and their texture maps), carried
into the package at the same relative paths, or dropped on request when missing.

Only OBJ keeps its references as files: the package mesh is rewritten from the transformed
vertices (with the source's UVs and materials, ``visual``); a glTF/GLB's base colour and
texture are converted by ``visual`` instead, and a PLY's references are not carried. A
missing file is refused with the referring line, exactly as ``catalog check`` would refuse
the package; ``--drop-missing-references`` removes that line instead and
says so in ``provenance.dropped_references``.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

from domain.errors import AssetValidationError
from runtime.assets.package import MAX_PACKAGE_BYTES
from runtime.assets.references import (
    _mtl_references,
    _obj_references,
    check_reference_path,
)
from runtime.inputs.reading import read_inside


@dataclass
class CarriedFiles:
    """Package files besides the mesh, the ``mtllib`` names the mesh keeps, its first
    material (the one ``usemtl`` selects), and what was dropped."""

    files: dict[str, bytes] = field(default_factory=dict)
    mtllibs: list[str] = field(default_factory=list)
    material: str | None = None
    dropped: list[dict[str, str]] = field(default_factory=list)


def _read(root: Path, rel: str) -> bytes | None:
    if not (root / rel).is_file():
        return None
    return read_inside(root, rel, limit=MAX_PACKAGE_BYTES, error=AssetValidationError)


def _missing(where: str, ref: str, drop: bool, carried: CarriedFiles) -> None:
    if not drop:
        raise AssetValidationError(
            f"{where}: referenced file {ref!r} is missing "
            "(--drop-missing-references removes the reference)"
        )
    carried.dropped.append({"reference": ref, "where": where})


def _without_lines(data: bytes, line_numbers: set[int]) -> bytes:
    lines = data.decode("utf-8", errors="replace").splitlines()
    kept = [line for number, line in enumerate(lines, start=1) if number not in line_numbers]
    return ("\n".join(kept) + "\n").encode()


def _carry_mtl(root: Path, mtl: str, data: bytes, drop: bool, carried: CarriedFiles) -> None:
    dropped_lines: set[int] = set()
    for ref, where in _mtl_references(mtl, data):
        target = check_reference_path(ref, posixpath.dirname(mtl), where=where)
        texture = _read(root, target)
        if texture is None:
            _missing(f"{root}/{where}", ref, drop, carried)
            dropped_lines.add(int(where.split(":")[1]))
        else:
            carried.files[target] = texture
    carried.files[mtl] = _without_lines(data, dropped_lines) if dropped_lines else data
    if carried.material is None:
        match = re.search(rb"^\s*newmtl\s+(\S+)", data, flags=re.MULTILINE)
        carried.material = match.group(1).decode() if match else None


def carry_obj_references(source: Path, *, drop_missing: bool) -> CarriedFiles:
    """Follow ``mtllib`` lines of ``source`` (and the MTL's texture maps) inside the
    source's folder; the package keeps the same relative layout."""
    carried = CarriedFiles()
    root = source.parent
    data = _read(root, source.name) or b""
    for ref, where in _obj_references(source.name, data):
        mtl = check_reference_path(ref, "", where=f"{root}/{where}")
        mtl_data = _read(root, mtl)
        if mtl_data is None:
            _missing(f"{root}/{where}", ref, drop_missing, carried)
            continue
        _carry_mtl(root, mtl, mtl_data, drop_missing, carried)
        carried.mtllibs.append(mtl)
    return carried
