"""A URDF's look: the textured mesh files its ``<visual>`` elements name, each under its own
transform (mesh scale, origin, link placement), gathered into one visual mesh.

pybullet's duck is a URDF whose visual is an OBJ with an MTL and a texture; importing only
its geometry would make it a grey duck. Each mesh file's parts are loaded as for a plain
source (``visual``); its MTL and texture files are carried beside ``mesh.obj``. Two files that
would need the same file name or material name with different content cannot share one
package folder, so the visual then stays geometry only (and provenance says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from domain.limits import MeshLimits
from runtime.assets.importing.source_files import carry_obj_references
from runtime.assets.importing.urdf import VisualSource
from runtime.assets.importing.visual import VisualMesh, VisualPart, load_visual, transformed
from runtime.assets.references import mesh_format


@dataclass
class UrdfVisual:
    visual: VisualMesh | None
    dropped: list[dict[str, str]] = field(default_factory=list)
    note: str | None = None


def _geometry_part(source: VisualSource) -> VisualPart:
    return VisualPart(
        np.asarray(source.mesh.vertices, dtype=np.float64),
        np.asarray(source.mesh.faces, dtype=np.int64), None, None, None,
    )


def urdf_visual(
    sources: Sequence[VisualSource], *, limits: MeshLimits, drop_missing: bool
) -> UrdfVisual:
    """The visual mesh in the root link's frame, or ``visual=None`` for geometry only."""
    parts: list[VisualPart] = []
    files: dict[str, bytes] = {}
    mtllibs: list[str] = []
    owner: dict[str, int] = {}  # material name -> the source that defines it
    result = UrdfVisual(None)
    for index, source in enumerate(sources):
        kind = mesh_format(source.path.name, where=str(source.path)) if source.path else None
        found = None
        if source.path is not None and kind in ("obj", "glb", "gltf", "ply"):
            carried = None
            if kind == "obj":
                carried = carry_obj_references(source.path, drop_missing=drop_missing)
                result.dropped.extend(carried.dropped)
            found = load_visual(
                source.path, kind, limits=limits,
                carried_files=carried.files if carried else {},
                mtllibs=carried.mtllibs if carried else [],
            )
            if found is not None:
                extra = {**(carried.files if carried else {}), **found.files}
                clash = sorted(n for n, data in extra.items() if files.get(n, data) != data)
                clash += sorted(
                    p.material for p in found.parts
                    if p.material is not None and owner.get(p.material, index) != index
                )
                if clash:
                    result.note = (
                        f"geometry only: {source.path.name} needs the name(s) "
                        f"{', '.join(clash)} another visual mesh already uses"
                    )
                    return result
                files.update(extra)
                mtllibs.extend(m for m in found.mtllibs if m not in mtllibs)
                for part in found.parts:
                    if part.material is not None:
                        owner[part.material] = index
                parts.extend(transformed(found, source.transform).parts)
                continue
        parts.append(_geometry_part(source))
    if not any(
        p.uv is not None or p.normals is not None or p.material is not None
        or p.colors is not None for p in parts
    ):
        return result
    result.visual = VisualMesh(parts, mtllibs, files)
    return result
