"""Loading a source mesh and bringing it into the package frame: metres, +Z up, welded,
origin at the bottom centre.

Meshes from other projects arrive Y-up (glTF says so by specification; OBJ/STL/PLY say
nothing, so the user says ``--up``), in other units, with duplicated vertices per face
(an STL always, many OBJ exporters too) and with the origin anywhere. Every later step
(bounds, regions, collision pieces) assumes the normalized frame, so it is made here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import trimesh

from domain.errors import AssetValidationError
from domain.limits import MeshLimits
from runtime.assets.meshes import load_mesh
from runtime.assets.references import mesh_format

UpAxis = Literal["y", "z"]
Centring = Literal["bbox", "footprint"]
#: Formats whose specification fixes the up axis (glTF 2.0: +Y is up).
SPEC_UP_AXIS: dict[str, UpAxis] = {"gltf": "y", "glb": "y"}
#: The lowest slab whose cross-section defines the footprint, as a share of the height.
FOOTPRINT_SLAB_FRACTION = 0.02


@dataclass(frozen=True)
class OrientedMesh:
    """The welded mesh in the package frame and how it got there (for provenance)."""

    mesh: trimesh.Trimesh
    collision: trimesh.Trimesh | None
    source_format: str
    up: UpAxis
    up_source: str
    scale: float
    centring: Centring
    vertices_loaded: int
    vertices_welded: int
    footprint_centre: tuple[float, float]
    transform: np.ndarray  # 4x4: source frame -> package frame (the visual parts follow it)


def up_axis_for(path: Path, requested: UpAxis | None) -> tuple[UpAxis, str]:
    """The source's up axis and where that answer came from (``--up``, the format, default)."""
    kind = mesh_format(path.name, where=str(path))
    if requested is not None:
        return requested, "--up"
    if kind in SPEC_UP_AXIS:
        return SPEC_UP_AXIS[kind], f"{kind} specification"
    return "z", "default (the format does not say)"


def y_up_to_z_up(mesh: trimesh.Trimesh) -> None:
    """Rotate +90 degrees about X: the source's +Y becomes +Z, right-handedness kept."""
    mesh.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [1.0, 0.0, 0.0]))


def weld(mesh: trimesh.Trimesh) -> trimesh.Trimesh:
    """Merge coincident vertices whatever their normals or UVs, drop degenerate and
    duplicate faces: six separate quads of a cube become one closed surface, which is what
    collision pieces (one convex hull per connected component) need."""
    welded = trimesh.Trimesh(
        vertices=np.asarray(mesh.vertices, dtype=np.float64),
        faces=np.asarray(mesh.faces, dtype=np.int64),
        process=False,
    )
    welded.merge_vertices(merge_tex=True, merge_norm=True)
    welded.update_faces(welded.nondegenerate_faces())
    welded.update_faces(welded.unique_faces())
    welded.remove_unreferenced_vertices()
    if len(welded.faces) == 0:
        raise AssetValidationError("mesh has no faces left after welding (all degenerate)")
    trimesh.repair.fix_normals(welded)
    return welded


def footprint_centre(mesh: trimesh.Trimesh) -> tuple[float, float]:
    """XY centre of the mesh's lowest slab: its cross-section just above the bottom, so a
    mug's handle (which starts higher up) does not pull the centre off the body."""
    low, high = mesh.bounds[0][2], mesh.bounds[1][2]
    height = float(high - low)
    section = mesh.section(
        plane_origin=[0.0, 0.0, low + FOOTPRINT_SLAB_FRACTION * height],
        plane_normal=[0.0, 0.0, 1.0],
    )
    if section is not None and len(section.vertices):
        points = np.asarray(section.vertices)[:, :2]
    else:  # a flat bottom face only: the vertices in the slab
        vertices = np.asarray(mesh.vertices)
        points = vertices[vertices[:, 2] <= low + FOOTPRINT_SLAB_FRACTION * height][:, :2]
    lower, upper = points.min(axis=0), points.max(axis=0)
    return float((lower[0] + upper[0]) / 2), float((lower[1] + upper[1]) / 2)


def load_oriented(
    path: Path,
    *,
    up: UpAxis | None,
    scale: float,
    centring: Centring,
    limits: MeshLimits,
) -> OrientedMesh:
    """Load ``path``, convert to +Z up, scale, weld and move the origin to the bottom centre
    (the box's XY centre, or the footprint's with ``centring="footprint"``)."""
    axis, axis_source = up_axis_for(path, up)
    loaded = load_mesh(path, label=str(path), limits=limits)
    return orient(
        loaded, None, label=str(path), source_format=mesh_format(path.name, where=str(path)),
        up=axis, up_source=axis_source, scale=scale, centring=centring,
    )


def orient(
    visual: trimesh.Trimesh,
    collision: trimesh.Trimesh | None,
    *,
    label: str,
    source_format: str,
    up: UpAxis,
    up_source: str,
    scale: float,
    centring: Centring,
) -> OrientedMesh:
    """Weld, turn to +Z up, scale and re-origin ``visual``; ``collision`` (a separate
    collision mesh in the same frame) gets exactly the same transform."""
    if not np.isfinite(scale) or scale <= 0:
        raise AssetValidationError(f"--scale: must be a positive number, got {scale!r}")
    vertices_loaded = len(visual.vertices)
    meshes = [weld(visual)] + ([weld(collision)] if collision is not None else [])
    for mesh in meshes:
        if up == "y":
            y_up_to_z_up(mesh)
        mesh.apply_scale(scale)
    mesh = meshes[0]
    extents = mesh.bounds[1] - mesh.bounds[0]
    if float(extents.min()) <= 0:
        raise AssetValidationError(f"{label}: mesh is flat (extents {extents.tolist()} m)")
    foot = footprint_centre(mesh)
    if centring == "footprint":
        cx, cy = foot
    else:
        cx, cy = ((mesh.bounds[0][:2] + mesh.bounds[1][:2]) / 2).tolist()
    shift = [-cx, -cy, -float(mesh.bounds[0][2])]
    for each in meshes:
        each.apply_translation(shift)
    transform = np.diag([scale, scale, scale, 1.0])
    if up == "y":
        transform = transform @ trimesh.transformations.rotation_matrix(np.pi / 2, [1.0, 0, 0])
    transform[:3, 3] = shift
    return OrientedMesh(
        mesh=mesh,
        collision=meshes[1] if collision is not None else None,
        source_format=source_format,
        up=up,
        up_source=up_source,
        scale=float(scale),
        centring=centring,
        vertices_loaded=vertices_loaded,
        vertices_welded=len(mesh.vertices),
        footprint_centre=(foot[0] - cx, foot[1] - cy),
        transform=transform,
    )
