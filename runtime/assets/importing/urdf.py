"""Reading a single-link URDF object (pybullet's mug, tray, duck, ...): its visual and
collision geometry, each with the mesh ``scale`` and the ``<origin xyz rpy>`` applied, in
the link frame (URDF is +Z up by convention, REP 103).

Only single-link objects are imported: a multi-link URDF is an articulated thing whose
joints the package format cannot describe, so it is refused rather than frozen in some
pose. Mesh file names must be relative paths inside the URDF's folder (``package://`` and
absolute paths would make the package depend on files we did not copy).
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import trimesh

from domain.errors import AssetValidationError
from domain.limits import MeshLimits
from domain.paths import contained_relpath
from runtime.assets.meshes import load_mesh
from runtime.inputs.reading import read_inside

MAX_URDF_BYTES = 1 << 20


def _numbers(text: str | None, count: int, default: float, where: str) -> list[float]:
    if text is None:
        return [default] * count
    try:
        values = [float(v) for v in text.split()]
    except ValueError:
        raise AssetValidationError(f"{where}: expected {count} numbers, got {text!r}") from None
    if len(values) == 1 and count == 3 and where.endswith("scale"):
        values = values * 3
    if len(values) != count or not np.isfinite(values).all():
        raise AssetValidationError(f"{where}: expected {count} finite numbers, got {text!r}")
    return values


def _origin(element: ElementTree.Element, where: str) -> np.ndarray:
    origin = element.find("origin")
    if origin is None:
        return np.eye(4)
    xyz = _numbers(origin.get("xyz"), 3, 0.0, f"{where}: origin xyz")
    roll, pitch, yaw = _numbers(origin.get("rpy"), 3, 0.0, f"{where}: origin rpy")
    # URDF rpy: fixed-axis X then Y then Z, i.e. R = Rz(yaw) Ry(pitch) Rx(roll).
    matrix = trimesh.transformations.euler_matrix(roll, pitch, yaw, axes="sxyz")
    matrix[:3, 3] = xyz
    return matrix


def _geometry(
    element: ElementTree.Element, root: Path, where: str, limits: MeshLimits
) -> trimesh.Trimesh:
    geometry = element.find("geometry")
    if geometry is None or len(geometry) != 1:
        raise AssetValidationError(f"{where}: needs exactly one <geometry> shape")
    shape = geometry[0]
    if shape.tag == "mesh":
        filename = shape.get("filename") or ""
        rel = contained_relpath(
            filename, where=f"{where}: mesh filename", error=AssetValidationError,
            root="the URDF's folder",
        )
        mesh = load_mesh(root / rel, label=str(root / rel), limits=limits)
        mesh.apply_scale(_numbers(shape.get("scale"), 3, 1.0, f"{where}: mesh scale"))
        return mesh
    if shape.tag == "box":
        return trimesh.creation.box(_numbers(shape.get("size"), 3, 0.0, f"{where}: box size"))
    if shape.tag == "cylinder":
        [radius] = _numbers(shape.get("radius"), 1, 0.0, f"{where}: cylinder radius")
        [length] = _numbers(shape.get("length"), 1, 0.0, f"{where}: cylinder length")
        return trimesh.creation.cylinder(radius=radius, height=length, sections=32)
    if shape.tag == "sphere":
        [radius] = _numbers(shape.get("radius"), 1, 0.0, f"{where}: sphere radius")
        return trimesh.creation.icosphere(subdivisions=3, radius=radius)
    raise AssetValidationError(f"{where}: unsupported geometry <{shape.tag}>")


def _parts(
    link: ElementTree.Element, tag: str, root: Path, label: str, limits: MeshLimits
) -> trimesh.Trimesh | None:
    meshes = []
    for index, element in enumerate(link.findall(tag)):
        where = f"{label}: {tag}[{index}]"
        mesh = _geometry(element, root, where, limits)
        mesh.apply_transform(_origin(element, where))
        meshes.append(mesh)
    return trimesh.util.concatenate(meshes) if meshes else None


def load_urdf(path: Path, limits: MeshLimits) -> tuple[trimesh.Trimesh, trimesh.Trimesh | None]:
    """(visual, collision) of the URDF's one link; visual falls back to collision."""
    data = read_inside(path.parent, path.name, limit=MAX_URDF_BYTES, error=AssetValidationError)
    if b"<!ENTITY" in data or b"<!DOCTYPE" in data:
        raise AssetValidationError(f"{path}: DOCTYPE/ENTITY declarations are not accepted")
    try:
        robot = ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise AssetValidationError(f"{path}: not valid XML ({exc})") from None
    links = robot.findall("link")
    if robot.tag != "robot" or len(links) != 1:
        raise AssetValidationError(
            f"{path}: only a <robot> with exactly one <link> is imported (found {len(links)})"
        )
    visual = _parts(links[0], "visual", path.parent, str(path), limits)
    collision = _parts(links[0], "collision", path.parent, str(path), limits)
    if visual is None and collision is None:
        raise AssetValidationError(f"{path}: the link has no visual or collision geometry")
    if visual is None:
        return collision, None  # type: ignore[return-value]
    return visual, collision
