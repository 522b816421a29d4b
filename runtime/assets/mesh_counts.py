"""Face and vertex counts of a mesh file read from its header, before any loader runs.

The counts are what the loader will allocate: a binary STL's triangle count, a PLY's element
counts, a glTF's accessor counts times the number of nodes that instance each mesh (a scene
flattened to one mesh repeats a mesh per node). OBJ has no header, so its ``v``/``f`` lines are
counted (polygons as the triangles they become), stopping as soon as a limit is passed. What
the loader returns is checked again afterwards (``meshes.load_mesh``), so a header that lies
low only moves the refusal later, never past it.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain.errors import AssetValidationError
from domain.limits import MeshLimits
from runtime.assets.references import glb_json_chunk, mesh_format
from runtime.inputs.json_text import load_json_strict

_OBJ_FACE = re.compile(rb"(?m)^[ \t]*f[ \t]+([^\n#]*)")
_PLY_ELEMENT = re.compile(rb"element\s+(\S+)\s+(\d+)")
_TRIANGLE_MODES = {4: 1, 5: 2, 6: 2}  # triangles; strip and fan lose two per primitive


@dataclass(frozen=True)
class MeshCounts:
    faces: int
    vertices: int


def _stl(data: bytes) -> MeshCounts:
    if len(data) < 84:
        return MeshCounts(0, 0)
    (claimed,) = struct.unpack_from("<I", data, 80)
    if data[:5].lower() == b"solid" and len(data) != 84 + 50 * claimed:
        faces = data.count(b"endfacet")
    else:
        faces = max(claimed, (len(data) - 84) // 50)
    return MeshCounts(faces, 3 * faces)


def _ply(data: bytes) -> MeshCounts:
    end = data.find(b"end_header")
    header = data[: end if end >= 0 else 4096]
    counts = {name.decode("ascii", "replace"): int(n) for name, n in _PLY_ELEMENT.findall(header)}
    faces = sum(n for name, n in counts.items() if name != "vertex")
    return MeshCounts(faces, counts.get("vertex", 0))


def _obj(data: bytes, limits: MeshLimits) -> MeshCounts:
    first = 1 if data[:2] in (b"v ", b"v\t") else 0
    vertices = data.count(b"\nv ") + data.count(b"\nv\t") + first
    if data.count(b"\nf ") > limits.max_mesh_faces:  # cheap bound before the exact count
        return MeshCounts(data.count(b"\nf "), vertices)
    faces = 0
    for match in _OBJ_FACE.finditer(data):
        faces += max(len(match.group(1).split()) - 2, 0)
        if faces > limits.max_mesh_faces:
            break
    return MeshCounts(faces, vertices)


def _int_field(item: Any, key: str, where: str) -> int:
    value = item.get(key, 0) if isinstance(item, dict) else 0
    if type(value) is not int or value < 0:
        raise AssetValidationError(f"{where}: {key} must be a non-negative integer")
    return value


def _accessor_count(doc: dict[str, Any], index: Any, where: str) -> int:
    accessors = doc.get("accessors", [])
    if type(index) is not int or not isinstance(accessors, list) or not 0 <= index < len(accessors):
        raise AssetValidationError(f"{where}: accessor index {index!r} does not exist")
    return _int_field(accessors[index], "count", f"{where}: accessors[{index}]")


def _mesh_counts(doc: dict[str, Any], mesh: Any, where: str) -> MeshCounts:
    faces = vertices = 0
    primitives = mesh.get("primitives", []) if isinstance(mesh, dict) else []
    for p, primitive in enumerate(primitives if isinstance(primitives, list) else []):
        if not isinstance(primitive, dict):
            continue
        here = f"{where}.primitives[{p}]"
        attributes = primitive.get("attributes", {})
        position = attributes.get("POSITION") if isinstance(attributes, dict) else None
        count = 0 if position is None else _accessor_count(doc, position, here)
        vertices += count
        mode = primitive.get("mode", 4)
        per = _TRIANGLE_MODES.get(mode) if type(mode) is int else None
        if per is None:
            continue  # points and lines: no triangles
        indexed = primitive.get("indices")
        n = count if indexed is None else _accessor_count(doc, indexed, here)
        faces += n // 3 if per == 1 else max(n - 2, 0)
    return MeshCounts(faces, vertices)


def _node_instances(doc: dict[str, Any], rel: str) -> dict[int, int]:
    """How many times each mesh is instanced by the node tree; a node with two parents or a
    cycle is refused (a loader walking it would repeat geometry without end)."""
    nodes = doc.get("nodes", [])
    if not isinstance(nodes, list):
        raise AssetValidationError(f"{rel}: nodes must be a list")
    parents: dict[int, int] = {}
    for i, node in enumerate(nodes):
        children = node.get("children", []) if isinstance(node, dict) else []
        for child in children if isinstance(children, list) else []:
            if type(child) is not int or not 0 <= child < len(nodes) or child == i:
                raise AssetValidationError(f"{rel}: nodes[{i}].children: bad node {child!r}")
            if child in parents:
                raise AssetValidationError(f"{rel}: nodes[{child}] has more than one parent")
            parents[child] = i
    settled: set[int] = set()  # nodes whose chain of parents is known to end at a root
    for start in range(len(nodes)):
        path: list[int] = []
        on_path: set[int] = set()
        node: int | None = start
        while node is not None and node not in settled:
            if node in on_path:
                raise AssetValidationError(f"{rel}: the node hierarchy has a cycle")
            path.append(node)
            on_path.add(node)
            node = parents.get(node)
        settled.update(path)  # each node is walked once: linear in the number of nodes
    instances: dict[int, int] = {}
    for node in nodes:
        mesh = node.get("mesh") if isinstance(node, dict) else None
        if type(mesh) is int:
            instances[mesh] = instances.get(mesh, 0) + 1
    return instances


def _gltf(rel: str, raw: bytes) -> MeshCounts:
    doc = load_json_strict(raw, rel, error=AssetValidationError)
    if not isinstance(doc, dict):
        raise AssetValidationError(f"{rel}: glTF JSON must be an object")
    meshes = doc.get("meshes", [])
    if not isinstance(meshes, list):
        raise AssetValidationError(f"{rel}: meshes must be a list")
    per_mesh = [_mesh_counts(doc, mesh, f"{rel}: meshes[{i}]") for i, mesh in enumerate(meshes)]
    instances = _node_instances(doc, rel)
    # Whether the loader walks the scene or takes every mesh once, count the larger.
    faces = max(
        sum(c.faces for c in per_mesh),
        sum(per_mesh[m].faces * n for m, n in instances.items() if 0 <= m < len(per_mesh)),
    )
    vertices = max(
        sum(c.vertices for c in per_mesh),
        sum(per_mesh[m].vertices * n for m, n in instances.items() if 0 <= m < len(per_mesh)),
    )
    return MeshCounts(faces, vertices)


def declared_counts(rel: str, files: Mapping[str, bytes], limits: MeshLimits) -> MeshCounts:
    """The counts mesh ``rel`` (a package relpath in ``files``) will load as."""
    kind = mesh_format(rel, where=rel)
    data = files[rel]
    if kind == "stl":
        return _stl(data)
    if kind == "ply":
        return _ply(data)
    if kind == "obj":
        return _obj(data, limits)
    if kind == "glb":
        return _gltf(rel, glb_json_chunk(rel, data))
    return _gltf(rel, data)


def check_declared_counts(
    rel: str, files: Mapping[str, bytes], limits: MeshLimits, *, label: str
) -> None:
    """Refuse mesh ``rel`` before loading it when its header exceeds a limit."""
    counts = declared_counts(rel, files, limits)
    limits.check(label, faces=counts.faces, vertices=counts.vertices)
