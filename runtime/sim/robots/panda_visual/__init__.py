"""Decimated visual meshes of the Franka Panda, committed with their SHA-256.

The arm's visual meshes as shipped are ~134k triangles, and a CPU rasterizer's cost is per
triangle: at camera resolutions (128-256 px) they dominated every recorded episode while
adding nothing a pixel can show. ``scripts/decimate_panda_visuals.py`` reduced them once
(quadric edge collapse) into the STL files beside this module and wrote ``manifest.json``
(source and output digests, triangle counts, settings). The simulator loads these files
as they are: nothing is decimated at run time, so frames never depend on a library
version, and ``verified_files`` refuses a file whose bytes are not the manifest's.
Collision meshes (physics) are not touched.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from runtime.sim.errors import SceneBuildError

DIRECTORY = Path(__file__).resolve().parent
MESH_NAMES = tuple(f"link{i}" for i in range(8)) + ("hand",)


@functools.cache
def manifest() -> dict:
    return json.loads((DIRECTORY / "manifest.json").read_text(encoding="utf-8"))


@functools.cache
def verified_files() -> dict[str, Path]:
    """``{mesh name: path}`` of every decimated mesh, each checked against the manifest."""
    files = {}
    for name, entry in manifest()["meshes"].items():
        path = DIRECTORY / entry["file"]
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        if digest != entry["sha256"]:
            raise SceneBuildError(
                f"{path}: the decimated Panda mesh is missing or altered "
                f"(expected sha256 {entry['sha256']}); reinstall assetcast"
            )
        files[name] = path
    return files
