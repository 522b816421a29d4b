"""What an imported asset looks like: the source's UVs, normals and materials, carried into
the package's visual mesh.

Collision and regions need the welded geometry (``loading``), but welding merges the
vertices a texture seam duplicates, so a textured mesh written from it loses its texture.
The visual mesh is therefore written from the source as loaded, part by part (one part per
material), under the very transform that put the welded mesh in the package frame, with
``vt``/``vn`` per vertex and ``usemtl`` per part; the welded mesh becomes ``collision.obj``.

* OBJ: the MTL and texture files are carried as they are (``source_files``); a part keeps its
  ``usemtl`` only when a carried MTL defines that material.
* glTF / GLB: each primitive's ``baseColorFactor`` and ``baseColorTexture`` become an MTL
  (``material.mtl``: ``Kd``, ``d``, ``map_Kd``) and PNG files (``texture_NNN.png``, pixels
  re-encoded by Pillow, deterministic for a given Pillow version).
* Vertex or face colours (a PLY scan, an OBJ's ``v x y z r g b``) become ``v x y z r g b``.

A source with no UVs, no normals and no material keeps the geometry-only path (same bytes as
before this module existed).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import trimesh

from domain.errors import AssetValidationError
from domain.limits import MeshLimits

MTL_NAME = "material.mtl"
#: Written beside the mesh for glTF/GLB sources; refused as source file names by ``writing``.
GENERATED_PREFIX = "texture_"


@dataclass(frozen=True)
class VisualPart:
    """One material's share of the visual mesh (package frame once transformed)."""

    vertices: np.ndarray  # (n, 3)
    faces: np.ndarray  # (m, 3)
    uv: np.ndarray | None  # (n, 2), OBJ convention (v = 0 at the image's bottom)
    normals: np.ndarray | None  # (n, 3), unit
    material: str | None  # the usemtl name, None for no material
    colors: np.ndarray | None = None  # (n, 3) uint8 vertex colours (``v x y z r g b``)


@dataclass
class VisualMesh:
    """The parts plus the files the mesh refers to that the importer generated."""

    parts: list[VisualPart]
    mtllibs: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def vertices(self) -> np.ndarray:
        return np.concatenate([part.vertices for part in self.parts])


def _given_normals(mesh: trimesh.Trimesh) -> np.ndarray | None:
    """Normals the file itself gave (trimesh keeps them in its cache), never computed ones."""
    cache = getattr(getattr(mesh, "_cache", None), "cache", {})
    normals = cache.get("vertex_normals") if isinstance(cache, dict) else None
    if normals is None or len(normals) != len(mesh.vertices):
        return None
    return np.asarray(normals, dtype=np.float64)


def _uv(mesh: trimesh.Trimesh) -> np.ndarray | None:
    uv = getattr(mesh.visual, "uv", None)
    if uv is None or len(uv) != len(mesh.vertices):
        return None
    return np.asarray(uv, dtype=np.float64)


def _meshes(path: Path) -> list[tuple[trimesh.Trimesh, np.ndarray | None]]:
    """The source's meshes in its own frame (scene-graph transforms applied), each with the
    normals its file gave."""
    try:
        loaded = trimesh.load(str(path), process=False)
    except Exception as exc:  # a malformed file is bad input whatever the loader raises
        raise AssetValidationError(
            f"{path}: mesh could not be loaded ({type(exc).__name__}: {exc})"
        ) from exc
    if isinstance(loaded, trimesh.Trimesh):
        return [(loaded, _given_normals(loaded))]
    if not isinstance(loaded, trimesh.Scene):
        return []
    meshes = []
    for node in sorted(loaded.graph.nodes_geometry):
        transform, name = loaded.graph[node]
        geometry = loaded.geometry[name]
        if isinstance(geometry, trimesh.Trimesh) and len(geometry.faces):
            normals = _given_normals(geometry)
            if normals is not None:
                normals = normals @ np.asarray(transform)[:3, :3].T
            copy = geometry.copy()
            copy.apply_transform(transform)
            meshes.append((copy, normals))
    return meshes


def _compact(part: VisualPart) -> VisualPart:
    """Only the vertices faces use: an unreferenced one would widen the written bounds."""
    used, inverse = np.unique(part.faces.reshape(-1), return_inverse=True)
    if len(used) == len(part.vertices):
        return part
    return VisualPart(
        part.vertices[used], inverse.reshape(-1, 3).astype(np.int64),
        None if part.uv is None else part.uv[used],
        None if part.normals is None else part.normals[used], part.material,
        None if part.colors is None else part.colors[used],
    )


def _colours(mesh: trimesh.Trimesh) -> tuple[trimesh.Trimesh, np.ndarray | None]:
    """Per-vertex RGB of a coloured mesh (a PLY scan, an OBJ with ``v x y z r g b``); face
    colours become vertex colours of an unmerged copy (each face its own three vertices)."""
    kind = getattr(mesh.visual, "kind", None)
    if kind == "vertex":
        return mesh, np.asarray(mesh.visual.vertex_colors, dtype=np.uint8)[:, :3]
    if kind == "face":
        faces = np.asarray(mesh.faces)
        colours = np.asarray(mesh.visual.face_colors, dtype=np.uint8)[:, :3]
        unmerged = trimesh.Trimesh(
            vertices=np.asarray(mesh.vertices)[faces.reshape(-1)],
            faces=np.arange(faces.size).reshape(-1, 3), process=False,
        )
        return unmerged, np.repeat(colours, 3, axis=0)
    return mesh, None


def _colour(values: Any) -> tuple[float, float, float, float] | None:
    if values is None:
        return None
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if array.size < 3:
        return None
    if array.max() > 1.0:
        array = array / 255.0
    return (float(array[0]), float(array[1]), float(array[2]),
            float(array[3]) if array.size > 3 else 1.0)


def _png(image: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _pbr_material(mesh: trimesh.Trimesh, index: int, files: dict[str, bytes]) -> str | None:
    """An MTL entry for a glTF primitive's base colour (and texture); its name, or None."""
    material = getattr(mesh.visual, "material", None)
    if material is None:
        return None
    if isinstance(material, trimesh.visual.material.PBRMaterial):
        image, colour = material.baseColorTexture, _colour(material.baseColorFactor)
    else:
        image = getattr(material, "image", None)
        colour = _colour(getattr(material, "diffuse", None))
    if image is None and colour is None:
        return None
    name = f"material_{index:03d}"
    lines = [f"newmtl {name}"]
    if image is not None and _uv(mesh) is not None:
        data = _png(image)
        # Primitives sharing one image (a common glTF layout) share one PNG file.
        texture = next(
            (name for name, existing in files.items()
             if name.startswith(GENERATED_PREFIX) and existing == data),
            f"{GENERATED_PREFIX}{index:03d}.png",
        )
        files[texture] = data
        lines.append("Kd 1 1 1")
        lines.append(f"map_Kd {texture}")
    elif colour is not None:
        lines.append(f"Kd {colour[0]!r} {colour[1]!r} {colour[2]!r}")
    if colour is not None and colour[3] < 1.0:
        lines.append(f"d {colour[3]!r}")
    files.setdefault(MTL_NAME, b"")
    files[MTL_NAME] += ("\n".join(lines) + "\n").encode()
    return name


def _defined_materials(carried_files: dict[str, bytes], mtllibs: list[str]) -> set[str]:
    names: set[str] = set()
    for mtl in mtllibs:
        text = carried_files.get(mtl, b"").decode("utf-8", errors="replace")
        names.update(re.findall(r"^\s*newmtl\s+(\S+)", text, flags=re.MULTILINE))
    return names


def load_visual(
    path: Path,
    source_format: str,
    *,
    limits: MeshLimits,
    carried_files: dict[str, bytes],
    mtllibs: list[str],
) -> VisualMesh | None:
    """The source's visual parts in its own frame, or None when it has nothing beyond
    geometry (no UVs, normals or materials): then the welded mesh is the visual."""
    if source_format not in ("obj", "glb", "gltf", "ply"):
        return None
    meshes = _meshes(path)
    limits.check(
        str(path), faces=sum(len(m.faces) for m, _ in meshes),
        vertices=sum(len(m.vertices) for m, _ in meshes),
    )
    visual = VisualMesh(parts=[], mtllibs=list(mtllibs) if source_format == "obj" else [])
    defined = _defined_materials(carried_files, mtllibs)
    for index, (mesh, normals) in enumerate(meshes):
        if source_format == "obj":
            name = getattr(getattr(mesh.visual, "material", None), "name", None)
            material = name if name in defined else None
        elif source_format == "ply":
            material = None
        else:
            material = _pbr_material(mesh, index, visual.files)
        coloured, colours = _colours(mesh)
        if coloured is not mesh:  # unmerged for face colours: per-vertex data no longer fits
            mesh, normals = coloured, None
        visual.parts.append(_compact(VisualPart(
            vertices=np.asarray(mesh.vertices, dtype=np.float64),
            faces=np.asarray(mesh.faces, dtype=np.int64),
            uv=_uv(mesh), normals=normals, material=material, colors=colours,
        )))
    if MTL_NAME in visual.files:
        visual.mtllibs = [MTL_NAME]
    if not any(
        p.uv is not None or p.normals is not None or p.material is not None
        or p.colors is not None
        for p in visual.parts
    ):
        return None
    return visual


def transformed(visual: VisualMesh, matrix: np.ndarray) -> VisualMesh:
    """``visual`` under the affine ``matrix``; normals by its inverse transpose (a URDF mesh
    may be scaled unevenly), renormalized."""
    linear = matrix[:3, :3]
    normal_map = np.linalg.inv(linear).T if abs(np.linalg.det(linear)) > 0 else linear
    parts = []
    for part in visual.parts:
        vertices = part.vertices @ linear.T + matrix[:3, 3]
        normals = None
        if part.normals is not None:
            turned = part.normals @ normal_map.T
            lengths = np.linalg.norm(turned, axis=1, keepdims=True)
            normals = np.divide(turned, lengths, out=np.zeros_like(turned), where=lengths > 0)
        parts.append(
            VisualPart(vertices, part.faces, part.uv, normals, part.material, part.colors)
        )
    return VisualMesh(parts, list(visual.mtllibs), dict(visual.files))


def visual_obj_bytes(visual: VisualMesh) -> bytes:
    """Deterministic OBJ: ``mtllib`` lines, then per part its ``usemtl``, ``v``, ``vt``,
    ``vn`` and faces (``a/b/c`` indices, 1-based and global across parts)."""
    lines = [f"mtllib {name}" for name in visual.mtllibs]
    offset = {"v": 0, "vt": 0, "vn": 0}
    for part in visual.parts:
        if part.material is not None and visual.mtllibs:
            lines.append(f"usemtl {part.material}")
        if part.colors is None:
            lines.extend(
                f"v {float(x)!r} {float(y)!r} {float(z)!r}" for x, y, z in part.vertices
            )
        else:
            lines.extend(
                f"v {float(x)!r} {float(y)!r} {float(z)!r} "
                f"{r / 255:.6g} {g / 255:.6g} {b / 255:.6g}"
                for (x, y, z), (r, g, b) in zip(
                    part.vertices, part.colors.astype(int).tolist(), strict=True
                )
            )
        if part.uv is not None:
            lines.extend(f"vt {float(u)!r} {float(v)!r}" for u, v in part.uv)
        if part.normals is not None:
            lines.extend(
                f"vn {float(x)!r} {float(y)!r} {float(z)!r}" for x, y, z in part.normals
            )
        for face in part.faces:
            corners = []
            for index in face:
                vertex = f"{offset['v'] + int(index) + 1}"
                uv = f"{offset['vt'] + int(index) + 1}" if part.uv is not None else ""
                if part.normals is not None:
                    corners.append(f"{vertex}/{uv}/{offset['vn'] + int(index) + 1}")
                elif part.uv is not None:
                    corners.append(f"{vertex}/{uv}")
                else:
                    corners.append(vertex)
            lines.append("f " + " ".join(corners))
        offset["v"] += len(part.vertices)
        offset["vt"] += len(part.uv) if part.uv is not None else 0
        offset["vn"] += len(part.normals) if part.normals is not None else 0
    return ("\n".join(lines) + "\n").encode("ascii")
