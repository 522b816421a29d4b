"""Loading package meshes with trimesh (the writers live in ``mesh_writers``).

Loading happens only after ``references.check_references`` accepted the package,
and only from the snapshot copy, so whatever the loader resolves is a file we hashed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import trimesh

from domain.errors import AssetValidationError
from domain.limits import MeshLimits
from runtime.assets.references import mesh_format
from runtime.assets.simple_obj import parse_simple_obj

_MERGE_SCALE = 10 ** trimesh.util.decimal_to_digits(trimesh.constants.tol.merge)


def load_mesh(path: Path, *, label: str, limits: MeshLimits | None = None) -> trimesh.Trimesh:
    """Load one mesh file (scenes are flattened) and check it is finite, non-empty and
    within ``limits``.

    Loaded unprocessed first: trimesh's processing silently drops NaN/Inf vertices, so a
    checked processed mesh would hide that the file itself (which ships in the snapshot and
    is what the simulator reads) holds non-finite coordinates.
    """
    kind = mesh_format(path.name, where=label)
    try:
        # Geometry only: preparation needs no texture, so none is decoded (an image can be
        # a decompression bomb far larger than its file).
        loaded = trimesh.load(
            str(path), file_type=kind, force="mesh", process=False, skip_materials=True
        )
    except Exception as exc:  # a malformed file is bad input whatever the loader raises
        raise AssetValidationError(
            f"{label}: mesh could not be loaded ({type(exc).__name__}: {exc})"
        ) from exc
    if not isinstance(loaded, trimesh.Trimesh):
        raise AssetValidationError(f"{label}: file holds no triangle mesh")
    _check_loaded(loaded.vertices, loaded.faces, label, limits)
    loaded.process()
    return loaded


def _check_loaded(
    vertices: np.ndarray, faces: np.ndarray, label: str, limits: MeshLimits | None
) -> None:
    if len(faces) == 0 or len(vertices) == 0:
        raise AssetValidationError(f"{label}: mesh is empty (no faces)")
    (limits or MeshLimits()).check(label, faces=len(faces), vertices=len(vertices))
    if not np.isfinite(vertices).all():
        raise AssetValidationError(f"{label}: mesh has non-finite vertex coordinates (nan/inf)")


def _merged(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What ``Trimesh.process()`` makes of a finite mesh whose vertices are all used:
    vertices equal to ``tol.merge`` merged, first occurrence kept, in order."""
    rounded = (vertices * _MERGE_SCALE).round().astype(np.int64)
    unique, inverse = trimesh.grouping.unique_rows(rounded, keep_order=True)
    if len(unique) == len(vertices):
        return vertices, faces
    return vertices[unique], inverse[faces.reshape(-1)].reshape((-1, 3))


def load_mesh_arrays(
    path: Path, data: bytes, *, label: str, limits: MeshLimits | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``load_mesh(path)`` as ``(vertices, faces)`` arrays; ``data`` is the file's bytes.

    A plain OBJ (``simple_obj``) is parsed from ``data`` directly, with the same checks and
    the same processing; any other file goes through ``load_mesh``.
    """
    parsed = parse_simple_obj(data) if mesh_format(path.name, where=label) == "obj" else None
    if parsed is None:
        mesh = load_mesh(path, label=label, limits=limits)
        return mesh.vertices.view(np.ndarray), mesh.faces.view(np.ndarray)
    vertices, faces = parsed
    _check_loaded(vertices, faces, label, limits)
    return _merged(vertices, faces)

