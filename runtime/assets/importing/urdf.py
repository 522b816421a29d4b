"""Reading a URDF object (pybullet's mug, tray, duck, ...): its visual and
collision geometry, each with the mesh ``scale`` and the ``<origin xyz rpy>`` applied, in
the link frame (URDF is +Z up by convention, REP 103).

Several links are merged when every joint between them is ``fixed`` (a mug whose handle is
its own link): each link's shapes are placed through the joint origins into the root link's
frame. A moving joint makes an articulated thing the package format cannot describe, so it is
refused rather than frozen in some pose. Mesh file names must be relative paths inside the
URDF's folder (``package://`` and absolute paths would make the package depend on files we
did not copy).
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True)
class VisualSource:
    """One ``<visual>`` element: its placed geometry (root link frame) and, for a mesh file,
    the file and the transform from the file's frame to the root link's (scale, origin,
    link placement), so the importer can carry the file's UVs and materials too."""

    mesh: trimesh.Trimesh
    path: Path | None
    transform: np.ndarray


def _shape(
    element: ElementTree.Element, root: Path, where: str, limits: MeshLimits
) -> tuple[trimesh.Trimesh, Path | None, np.ndarray]:
    """The shape (mesh file scaled, or primitive), its file if any, and the scale applied."""
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
        scale = np.diag([*_numbers(shape.get("scale"), 3, 1.0, f"{where}: mesh scale"), 1.0])
        mesh.apply_transform(scale)
        return mesh, root / rel, scale
    if shape.tag == "box":
        size = _numbers(shape.get("size"), 3, 0.0, f"{where}: box size")
        return trimesh.creation.box(size), None, np.eye(4)
    if shape.tag == "cylinder":
        [radius] = _numbers(shape.get("radius"), 1, 0.0, f"{where}: cylinder radius")
        [length] = _numbers(shape.get("length"), 1, 0.0, f"{where}: cylinder length")
        return trimesh.creation.cylinder(radius=radius, height=length, sections=32), None, np.eye(4)
    if shape.tag == "sphere":
        [radius] = _numbers(shape.get("radius"), 1, 0.0, f"{where}: sphere radius")
        return trimesh.creation.icosphere(subdivisions=3, radius=radius), None, np.eye(4)
    raise AssetValidationError(f"{where}: unsupported geometry <{shape.tag}>")


def _parts(
    link: ElementTree.Element, tag: str, root: Path, label: str, limits: MeshLimits,
    placement: np.ndarray,
) -> list[VisualSource]:
    """The link's ``tag`` shapes, each at its origin within the link, the link at
    ``placement`` within the root link."""
    sources = []
    name = link.get("name") or "?"
    for index, element in enumerate(link.findall(tag)):
        where = f"{label}: link {name!r}: {tag}[{index}]"
        mesh, path, scale = _shape(element, root, where, limits)
        placed = placement @ _origin(element, where)
        mesh.apply_transform(placed)
        sources.append(VisualSource(mesh, path, placed @ scale))
    return sources


def _placements(robot: ElementTree.Element, path: Path) -> dict[str, np.ndarray]:
    """Every link's pose in the root link's frame, through fixed joints only.

    A moving joint (revolute, prismatic, continuous, ...) makes an articulated object that
    one rigid package cannot describe; freezing it in its zero pose would silently import
    something else, so it is refused."""
    links = [link.get("name") or "" for link in robot.findall("link")]
    if len(set(links)) != len(links) or "" in links:
        raise AssetValidationError(f"{path}: every <link> needs a unique name")
    parent_of: dict[str, tuple[str, np.ndarray]] = {}
    for index, joint in enumerate(robot.findall("joint")):
        name = joint.get("name") or f"joint[{index}]"
        kind = joint.get("type")
        if kind != "fixed":
            raise AssetValidationError(
                f"{path}: joint {name!r} is {kind!r}: only fixed joints are imported "
                "(an articulated object cannot be one rigid package)"
            )
        parent, child = joint.find("parent"), joint.find("child")
        parent_name = parent.get("link") if parent is not None else None
        child_name = child.get("link") if child is not None else None
        if parent_name not in links or child_name not in links:
            raise AssetValidationError(
                f"{path}: joint {name!r}: parent and child must name links of this robot"
            )
        assert parent_name is not None and child_name is not None
        if child_name in parent_of:
            raise AssetValidationError(f"{path}: link {child_name!r} has two parent joints")
        parent_of[child_name] = (parent_name, _origin(joint, f"{path}: joint {name!r}"))
    roots = [link for link in links if link not in parent_of]
    if len(roots) != 1:
        raise AssetValidationError(
            f"{path}: the links must form one tree (found {len(roots)} root links)"
        )
    placements: dict[str, np.ndarray] = {roots[0]: np.eye(4)}

    def place(link: str, chain: tuple[str, ...]) -> np.ndarray:
        if link in placements:
            return placements[link]
        if link in chain:
            raise AssetValidationError(f"{path}: joints form a cycle through link {link!r}")
        parent, origin = parent_of[link]
        placements[link] = place(parent, (*chain, link)) @ origin
        return placements[link]

    for link in links:
        place(link, ())
    return placements


#: pybullet's ``<contact>`` children -> descriptor friction kinds.
CONTACT_FRICTION = {
    "lateral_friction": "sliding",
    "spinning_friction": "torsional",
    "rolling_friction": "rolling",
}


@dataclass(frozen=True)
class UrdfObject:
    """The merged geometry, and what the URDF says about physics (descriptor ``physics``
    keys: ``mass_kg`` the sum of the links' ``<inertial><mass>``, ``friction`` from pybullet's
    ``<contact>``), with where each value came from."""

    visual: trimesh.Trimesh
    collision: trimesh.Trimesh | None
    physics: dict[str, Any]
    physics_source: dict[str, str]
    visual_sources: tuple[VisualSource, ...] = ()


def _scalar(element: ElementTree.Element | None, where: str) -> float | None:
    if element is None:
        return None
    [value] = _numbers(element.get("value"), 1, 0.0, where)
    return value


def _physics(robot: ElementTree.Element, path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """Mass and friction as the URDF states them. A total mass of zero is pybullet's way of
    saying "static" (a tray bolted to the world), not a weight: it is left out."""
    physics: dict[str, Any] = {}
    source: dict[str, str] = {}
    masses = []
    friction: dict[str, float] = {}
    for link in robot.findall("link"):
        name = link.get("name")
        where = f"{path}: link {name!r}"
        mass = _scalar(link.find("inertial/mass"), f"{where}: inertial mass")
        if mass is not None:
            if mass < 0:
                raise AssetValidationError(f"{where}: inertial mass: must not be negative")
            masses.append(mass)
        for tag, kind in CONTACT_FRICTION.items():
            value = _scalar(link.find(f"contact/{tag}"), f"{where}: contact {tag}")
            if value is not None and kind not in friction and (value > 0 or kind != "sliding"):
                friction[kind] = value
                source[f"friction.{kind}"] = f"URDF <contact><{tag}> of link {name!r}"
    if masses and sum(masses) > 0:
        physics["mass_kg"] = float(sum(masses))
        source["mass_kg"] = "URDF <inertial><mass> (sum over links)"
    if friction:
        physics["friction"] = friction
    return physics, source


def load_urdf(path: Path, limits: MeshLimits) -> UrdfObject:
    """The URDF's links merged through their fixed joints, in the root link's frame (the
    visual falls back to the collision), and its stated physics."""
    data = read_inside(path.parent, path.name, limit=MAX_URDF_BYTES, error=AssetValidationError)
    if b"<!ENTITY" in data or b"<!DOCTYPE" in data:
        raise AssetValidationError(f"{path}: DOCTYPE/ENTITY declarations are not accepted")
    try:
        robot = ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise AssetValidationError(f"{path}: not valid XML ({exc})") from None
    if robot.tag != "robot" or not robot.findall("link"):
        raise AssetValidationError(f"{path}: expected a <robot> with at least one <link>")
    placements = _placements(robot, path)
    merged: dict[str, trimesh.Trimesh | None] = {}
    sources: dict[str, list[VisualSource]] = {}
    for tag in ("visual", "collision"):
        sources[tag] = [
            source for link in robot.findall("link")
            for source in _parts(link, tag, path.parent, str(path), limits,
                                 placements[link.get("name") or ""])
        ]
        meshes = [source.mesh for source in sources[tag]]
        merged[tag] = trimesh.util.concatenate(meshes) if meshes else None
        if merged[tag] is not None:
            mesh = merged[tag]
            limits.check(f"{path} ({tag})", faces=len(mesh.faces), vertices=len(mesh.vertices))
    visual, collision = merged["visual"], merged["collision"]
    if visual is None and collision is None:
        raise AssetValidationError(f"{path}: the links have no visual or collision geometry")
    physics, source = _physics(robot, path)
    if visual is None:
        return UrdfObject(collision, None, physics, source)  # type: ignore[arg-type]
    return UrdfObject(visual, collision, physics, source, tuple(sources["visual"]))
