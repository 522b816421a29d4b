"""Writing an imported package: byte-deterministic files, published whole or not at all.

The same source and options give the same bytes (content identity in the cache depends
on it), so the mesh is written by ``mesh_writers.obj_bytes`` (shortest round-trip floats)
and the manifest as sorted, indented JSON. ``bounds_m`` is computed from exactly the
vertex values written, so preparation's bounds check holds bit for bit.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import trimesh

from domain.assets import AssetDescriptor
from domain.errors import AssetValidationError
from runtime.assets.mesh_writers import obj_bytes
from runtime.assets.package import MANIFEST_NAME
from runtime.files import fsync_directory, fsync_tree, write_files_fsynced

MESH_NAME = "mesh.obj"
COLLISION_NAME = "collision.obj"


def mesh_file(mesh: trimesh.Trimesh, *, mtllibs: list[str], material: str | None) -> bytes:
    header = "".join(f"mtllib {name}\n" for name in mtllibs)
    if mtllibs and material:
        header += f"usemtl {material}\n"
    body = obj_bytes(np.asarray(mesh.vertices), np.asarray(mesh.faces))
    return header.encode() + body


def package_files(
    descriptor: AssetDescriptor,
    mesh_data: bytes,
    carried: dict[str, bytes],
    *,
    collision: bytes | None = None,
) -> dict[str, bytes]:
    own = (MESH_NAME, COLLISION_NAME, MANIFEST_NAME)
    if any(name in carried for name in own):
        raise AssetValidationError(
            f"the source refers to a file named {', '.join(own)}, which the package needs "
            "for itself"
        )
    manifest: dict[str, Any] = {
        "descriptor": descriptor.to_dict(),
        "visual_path": MESH_NAME,
        "collision_path": COLLISION_NAME if collision is not None else None,
    }
    files = dict(carried)
    files[MESH_NAME] = mesh_data
    if collision is not None:
        files[COLLISION_NAME] = collision
    files[MANIFEST_NAME] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    return files


def _same_content(folder: Path, files: dict[str, bytes]) -> bool:
    existing = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    return existing == sorted(files) and all(
        (folder / rel).read_bytes() == data for rel, data in files.items()
    )


def write_package(folder: Path, files: dict[str, bytes]) -> bool:
    """Write ``files`` as ``folder`` (False: identical bytes already there). A folder with
    other content is refused, never overwritten; a crash leaves no half package (the files
    are staged beside it and renamed in one step)."""
    if folder.exists():
        if _same_content(folder, files):
            return False
        raise AssetValidationError(f"{folder}: already exists with different content")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".import-{folder.name}-{uuid.uuid4().hex}"
    try:
        write_files_fsynced(staging, sorted(files.items()))
        fsync_tree(staging, files=False)
        os.rename(staging, folder)
        fsync_directory(folder.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return True
