"""``catalog import``: one source mesh in, one normalized asset package out.

One interface (:func:`import_asset`), one module per step: ``loading`` (orientation,
scale, welding, origin), ``urdf`` (links merged through fixed joints, stated physics),
``visual`` (UVs, normals, materials, colours), ``urdf_visual`` (a URDF's mesh files'
look), ``regions`` (container and support estimates), ``physics`` (flags over stated mass
and friction), ``source_files`` (the MTL/texture files an OBJ refers to) and ``writing``
(deterministic package bytes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from domain.assets import AssetDescriptor, Bounds3D, JsonScalar
from domain.canonical import sha256_hex
from domain.errors import AssetValidationError
from domain.limits import MeshLimits
from runtime.assets.importing.loading import (
    Centring,
    OrientedMesh,
    UpAxis,
    load_oriented,
    orient,
)
from runtime.assets.importing.physics import flag_physics_of, merged_physics
from runtime.assets.importing.regions import (
    estimate_container,
    estimate_pouring,
    estimate_support,
)
from runtime.assets.importing.source_files import CarriedFiles, carry_obj_references
from runtime.assets.importing.urdf import UrdfObject, load_urdf
from runtime.assets.importing.urdf_visual import urdf_visual
from runtime.assets.importing.visual import (
    MTL_NAME,
    VisualMesh,
    load_visual,
    transformed,
    visual_obj_bytes,
)
from runtime.assets.importing.writing import mesh_file, package_files, write_package
from runtime.assets.package import MAX_PACKAGE_BYTES
from runtime.inputs.reading import read_inside

__all__ = ["ImportOptions", "ImportResult", "import_asset"]

log = structlog.get_logger(__name__)

IMPORTER = "assetcast catalog import 1"
#: How far the textured parts' box may lie from the welded mesh's (float noise of welding).
VISUAL_BOUNDS_TOLERANCE_M = 1e-7
SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class ImportOptions:
    asset_id: str
    category: str
    capabilities: tuple[str, ...] = ()
    attributes: dict[str, JsonScalar] = field(default_factory=dict)
    up: UpAxis | None = None
    scale: float = 1.0
    centring: Centring = "bbox"
    container: bool = False
    support: bool = False
    pouring: bool = False
    drop_missing_references: bool = False
    limits: MeshLimits = field(default_factory=MeshLimits)
    mass_kg: float | None = None
    density_kg_m3: float | None = None
    friction: tuple[float, ...] | None = None  # sliding[, torsional[, rolling]]


@dataclass(frozen=True)
class ImportResult:
    package_dir: Path
    descriptor: AssetDescriptor
    written: bool
    faces: int
    vertices: int


def _bounds(mesh_vertices: Any) -> Bounds3D:
    lower = tuple(float(v) for v in mesh_vertices.min(axis=0))
    upper = tuple(float(v) for v in mesh_vertices.max(axis=0))
    return Bounds3D(lower, upper)  # type: ignore[arg-type]


def _provenance(
    source: Path, digest: str, oriented: OrientedMesh, carried: CarriedFiles
) -> dict[str, Any]:
    provenance: dict[str, Any] = {
        "source": {"file": source.name, "sha256": digest, "format": oriented.source_format},
        "importer": IMPORTER,
        "transform": {
            "up": oriented.up,
            "up_from": oriented.up_source,
            "scale": oriented.scale,
            "origin": oriented.centring,
            "welded_vertices": oriented.vertices_welded,
        },
    }
    if oriented.centring == "footprint":
        provenance["origin"] = "footprint"
    if carried.dropped:
        provenance["dropped_references"] = carried.dropped
    if oriented.source_format != "obj":
        provenance["materials"] = "not carried (geometry only from this format)"
    return provenance


def _visual(
    source: Path, oriented: OrientedMesh, carried: CarriedFiles, options: ImportOptions,
    urdf: UrdfObject | None, provenance: dict[str, Any],
) -> VisualMesh | None:
    """The source's textured parts in the package frame, or None (geometry only): none to
    keep, or parts whose bounds are not the welded mesh's (vertices only degenerate faces
    used), which would break the normalized frame. A URDF's visual mesh files count as its
    source (their dropped references and any reason for geometry only go to provenance)."""
    if urdf is not None:
        gathered = urdf_visual(
            urdf.visual_sources, limits=options.limits,
            drop_missing=options.drop_missing_references,
        )
        if gathered.dropped:
            provenance["dropped_references"] = gathered.dropped
        if gathered.note:
            provenance["visual_note"] = gathered.note
        found = gathered.visual
    else:
        found = load_visual(
            source, oriented.source_format, limits=options.limits,
            carried_files=carried.files, mtllibs=carried.mtllibs,
        )
    if found is None:
        return None
    placed = transformed(found, oriented.transform)
    vertices = placed.vertices
    deviation = max(
        float(np.max(np.abs(vertices.min(axis=0) - oriented.mesh.bounds[0]))),
        float(np.max(np.abs(vertices.max(axis=0) - oriented.mesh.bounds[1]))),
    )
    if deviation > VISUAL_BOUNDS_TOLERANCE_M:
        log.info("import.visual_dropped", source=str(source), deviation_m=deviation)
        return None
    return placed


def import_asset(source: Path, catalog: Path, options: ImportOptions) -> ImportResult:
    """Import ``source`` as ``catalog/<asset_id>``; bad input is AssetValidationError."""
    if not SAFE_ID.fullmatch(options.asset_id):
        raise AssetValidationError(
            f"--id: {options.asset_id!r} must be letters, digits, '.', '_' or '-' "
            "(it names the package folder)"
        )
    flag_physics = flag_physics_of(options.mass_kg, options.density_kg_m3, options.friction)
    source = source.absolute()
    if not source.is_file():
        raise AssetValidationError(f"{source}: source mesh does not exist")
    digest = sha256_hex(
        read_inside(source.parent, source.name, limit=MAX_PACKAGE_BYTES, error=AssetValidationError)
    )
    urdf: UrdfObject | None = None
    if source.suffix.lower() == ".urdf":
        urdf = load_urdf(source, options.limits)
        stated_physics, stated_source = urdf.physics, urdf.physics_source
        oriented = orient(
            urdf.visual, urdf.collision, label=str(source), source_format="urdf",
            up=options.up or "z", up_source="--up" if options.up else "URDF convention (z up)",
            scale=options.scale, centring=options.centring,
        )
    else:
        stated_physics, stated_source = {}, {}
        oriented = load_oriented(
            source, up=options.up, scale=options.scale, centring=options.centring,
            limits=options.limits,
        )
    physics, physics_source = merged_physics(
        flag_physics, stated_physics, stated_source, str(source)
    )
    carried = (
        carry_obj_references(source, drop_missing=options.drop_missing_references)
        if oriented.source_format == "obj" else CarriedFiles()
    )
    provenance = _provenance(source, digest, oriented, carried)
    visual = _visual(source, oriented, carried, options, urdf, provenance)
    if visual is not None:
        mesh_data = visual_obj_bytes(visual)
        provenance["visual"] = (
            "the source's UVs, normals and materials per part; collision.obj is the welded mesh"
        )
        if oriented.source_format == "urdf":
            provenance["materials"] = "carried from the visual mesh files"
        elif oriented.source_format in ("glb", "gltf"):
            provenance["materials"] = (
                f"base colour and texture converted to {MTL_NAME} and PNG files"
            )
        elif oriented.source_format == "ply":
            provenance["materials"] = "vertex colours kept (v x y z r g b)"
    else:
        mesh_data = mesh_file(oriented.mesh, mtllibs=carried.mtllibs, material=carried.material)
    estimated: dict[str, Any] = {}
    container = support = None
    if options.container:
        found = estimate_container(oriented.mesh, oriented.footprint_centre)
        container, estimated["container_region"] = found.region, found.evidence
    if options.support:
        found = estimate_support(oriented.mesh)
        support, estimated["support_region"] = found.region, found.evidence
    if options.pouring:
        provenance["pouring"] = estimate_pouring(oriented.mesh, oriented.footprint_centre)
        estimated["pouring"] = {"estimated": True, "method": "inner rim radius by ray casts"}
    if estimated:
        provenance["estimated"] = estimated
    if physics_source:
        provenance["physics_from"] = physics_source
    descriptor = AssetDescriptor(
        asset_id=options.asset_id,
        category=options.category,
        attributes=dict(options.attributes),
        capabilities=tuple(options.capabilities),
        bounds_m=_bounds(visual.vertices if visual is not None else oriented.mesh.vertices),
        container_region=container,
        support_region=support,
        provenance=provenance,
        normalized=True,
        physics=physics,
    )
    folder = catalog.absolute() / options.asset_id
    collision = oriented.collision
    if collision is None and visual is not None:
        collision = oriented.mesh  # the visual keeps its seams; collision needs the weld
    collision_data = (
        None if collision is None else mesh_file(collision, mtllibs=[], material=None)
    )
    extra = {**carried.files, **(visual.files if visual is not None else {})}
    files = package_files(descriptor, mesh_data, extra, collision=collision_data)
    written = write_package(folder, files)
    return ImportResult(
        folder, descriptor, written, len(oriented.mesh.faces), len(oriented.mesh.vertices)
    )
