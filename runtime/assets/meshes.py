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
    if len(loaded.faces) == 0 or len(loaded.vertices) == 0:
        raise AssetValidationError(f"{label}: mesh is empty (no faces)")
    (limits or MeshLimits()).check(
        label, faces=len(loaded.faces), vertices=len(loaded.vertices)
    )
    if not np.isfinite(loaded.vertices).all():
        raise AssetValidationError(f"{label}: mesh has non-finite vertex coordinates (nan/inf)")
    loaded.process()
    return loaded

