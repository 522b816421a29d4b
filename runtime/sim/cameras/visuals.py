"""What an asset looks like: its visual mesh, materials and textures, added to the scene.

Physics uses an entity's convex collision pieces; a camera should see the package's real
visual mesh with its colours. ``load_visual_parts`` reads the visual mesh through trimesh
(which decodes the images with Pillow) into parts of one colour or one texture each:

* OBJ + MTL: ``Kd`` colour and ``map_Kd`` texture per material;
* glTF / GLB: ``baseColorFactor`` and ``baseColorTexture`` per primitive;
* PLY (or any mesh) with vertex or face colours: MuJoCo meshes carry no colours, so the
  faces are grouped by colour (at most ``PALETTE_SIZE`` groups, nearest colour otherwise),
  one part per group.

``add_visual`` adds them to an entity body as render-only geoms (no contacts, no mass), with
textures handed to MuJoCo as decoded pixels, so nothing is converted or written in the
snapshot or the deployment and the deployment stays byte-identical. Names are derived from
the entity, so ``remove_visual`` can delete exactly what ``add_visual`` added.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import structlog
import trimesh

log = structlog.get_logger(__name__)

VISUAL_GROUP = 2
PALETTE_SIZE = 16
MAX_TEXTURE_SIDE = 1024
DEFAULT_RGBA = (0.6, 0.6, 0.6, 1.0)


@dataclass(frozen=True)
class VisualPart:
    """One render-only mesh: package-frame vertices, one colour and optionally a texture.

    ``texcoords`` follow the OBJ convention (v = 0 at the image's bottom row); ``texture``
    rows are top first, as images are stored."""

    vertices: np.ndarray  # (n, 3) float64
    faces: np.ndarray  # (m, 3) int32
    rgba: tuple[float, float, float, float]
    texcoords: np.ndarray | None = None  # (n, 2)
    texture: np.ndarray | None = None  # (h, w, 3) uint8


def _image_array(image: Any) -> np.ndarray | None:
    if image is None:
        return None
    picture = image.convert("RGB")
    if max(picture.size) > MAX_TEXTURE_SIDE:
        scale = MAX_TEXTURE_SIDE / max(picture.size)
        size = (max(1, round(picture.size[0] * scale)), max(1, round(picture.size[1] * scale)))
        picture = picture.resize(size)
    return np.asarray(picture, dtype=np.uint8).copy()


def _colour(values: Any) -> tuple[float, float, float, float]:
    if values is None:
        return DEFAULT_RGBA
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if array.size < 3:
        return DEFAULT_RGBA
    if array.max() > 1.0:
        array = array / 255.0
    alpha = float(array[3]) if array.size > 3 else 1.0
    return (float(array[0]), float(array[1]), float(array[2]), alpha)


def _material_parts(mesh: trimesh.Trimesh) -> list[VisualPart]:
    vertices = np.asarray(mesh.vertices, dtype=np.float64)
    faces = np.asarray(mesh.faces, dtype=np.int32)
    visual = mesh.visual
    material = getattr(visual, "material", None)
    texture, rgba = None, DEFAULT_RGBA
    if isinstance(material, trimesh.visual.material.PBRMaterial):
        texture = _image_array(material.baseColorTexture)
        rgba = _colour(material.baseColorFactor)
    elif material is not None:
        texture = _image_array(getattr(material, "image", None))
        rgba = _colour(getattr(material, "diffuse", None))
    uv = getattr(visual, "uv", None)
    if texture is not None and uv is not None and len(uv) == len(vertices):
        # The texture already carries the colour; a tint would only darken it.
        return [VisualPart(vertices, faces, (1.0, 1.0, 1.0, rgba[3]), np.asarray(uv), texture)]
    return [VisualPart(vertices, faces, rgba)]


def _palette_parts(mesh: trimesh.Trimesh) -> list[VisualPart]:
    """Faces grouped by colour: the most frequent colours, each face to its nearest one."""
    colours = np.asarray(mesh.visual.face_colors, dtype=np.int64)[:, :4]
    unique, inverse, counts = np.unique(colours, axis=0, return_inverse=True, return_counts=True)
    order = np.lexsort((np.arange(len(unique)), -counts))[:PALETTE_SIZE]
    palette = unique[order]
    distance = ((unique[:, None, :3] - palette[None, :, :3]) ** 2).sum(axis=2)
    nearest = np.argmin(distance, axis=1)[np.asarray(inverse).reshape(-1)]
    parts = []
    vertices = np.asarray(mesh.vertices, dtype=np.float64)
    for index, colour in enumerate(palette):
        faces = np.asarray(mesh.faces, dtype=np.int32)[nearest == index]
        if len(faces):
            used, remapped = np.unique(faces, return_inverse=True)
            parts.append(
                VisualPart(vertices[used], remapped.reshape(-1, 3).astype(np.int32),
                           _colour(colour))
            )
    return parts


def _mesh_parts(mesh: trimesh.Trimesh) -> list[VisualPart]:
    if len(mesh.faces) == 0:
        return []
    kind = getattr(mesh.visual, "kind", None)
    if kind in ("vertex", "face"):
        return _palette_parts(mesh)
    return _material_parts(mesh)


@lru_cache(maxsize=64)
def _cached_parts(path: str, identity: str) -> tuple[VisualPart, ...]:
    del identity  # part of the cache key only: a changed package is a new snapshot
    loaded = trimesh.load(path, process=False)
    if isinstance(loaded, trimesh.Scene):
        meshes = []
        for node in loaded.graph.nodes_geometry:
            transform, name = loaded.graph[node]
            mesh = loaded.geometry[name].copy()
            mesh.apply_transform(transform)
            meshes.append(mesh)
    else:
        meshes = [loaded]
    parts = []
    for mesh in meshes:
        if isinstance(mesh, trimesh.Trimesh):
            parts.extend(_mesh_parts(mesh))
    return tuple(parts)


def load_visual_parts(path: Path, identity: str = "") -> tuple[VisualPart, ...]:
    """The visual mesh at ``path`` as parts; ``()`` when it cannot be read (the camera then
    shows the collision pieces, and a warning says why)."""
    try:
        return _cached_parts(str(path), identity)
    except Exception as error:  # trimesh and Pillow raise many types for bad files
        log.warning("sim.visual_mesh_unreadable", path=str(path), detail=str(error))
        return ()


def _names(entity_id: str, index: int) -> tuple[str, str, str, str]:
    stem = f"entity_{entity_id}_visual_{index:03d}"
    return stem, f"{stem}_mesh", f"{stem}_material", f"{stem}_texture"


def add_visual(
    spec: mujoco.MjSpec, body: mujoco.MjsBody, entity_id: str, parts: tuple[VisualPart, ...]
) -> None:
    """Render-only geoms of ``parts`` on ``body`` (group ``VISUAL_GROUP``, no contacts)."""
    for index, part in enumerate(parts):
        geom_name, mesh_name, material_name, texture_name = _names(entity_id, index)
        mesh = spec.add_mesh(name=mesh_name)
        mesh.uservert = part.vertices.reshape(-1)
        mesh.userface = part.faces.reshape(-1)
        mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL
        material = spec.add_material(name=material_name, rgba=list(part.rgba))
        if part.texture is not None and part.texcoords is not None:
            uv = np.asarray(part.texcoords, dtype=np.float64).copy()
            uv[:, 1] = 1.0 - uv[:, 1]  # MuJoCo samples row 0 at v = 0
            mesh.usertexcoord = uv.reshape(-1)
            texture = spec.add_texture(
                name=texture_name,
                type=mujoco.mjtTexture.mjTEXTURE_2D,
                width=int(part.texture.shape[1]),
                height=int(part.texture.shape[0]),
                nchannel=3,
            )
            texture.data = np.ascontiguousarray(part.texture).tobytes()
            material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = texture_name
        body.add_geom(
            name=geom_name,
            type=mujoco.mjtGeom.mjGEOM_MESH,
            meshname=mesh_name,
            material=material_name,
            contype=0,
            conaffinity=0,
            group=VISUAL_GROUP,
            density=0.0,
            mass=0.0,
        )


def remove_visual(spec: mujoco.MjSpec, entity_id: str) -> None:
    """Delete the meshes, materials and textures ``add_visual`` made (geoms go with the body)."""
    index = 0
    while True:
        _geom, mesh_name, material_name, texture_name = _names(entity_id, index)
        mesh = spec.mesh(mesh_name)
        if mesh is None:
            return
        spec.delete(mesh)
        spec.delete(spec.material(material_name))
        texture = spec.texture(texture_name)
        if texture is not None:
            spec.delete(texture)
        index += 1
