"""Build the MuJoCo scene of a task through ``mujoco.MjSpec``, in a canonical order.

The canonical order — table, robot, non-role entities (task order), then role
entities (task order), each entity's meshes named after the entity — is what makes
asset replacement exact: deleting the role bodies and re-adding them appends them in
the very position a fresh build would have put them, so the compiled model of a
replaced environment equals the model built fresh from the same deployment.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import mujoco
import numpy as np

from runtime.sim.contact import (
    CONDIM,
    CONTACT_SOLREF,
    IMPRATIO,
    TABLE_FRICTION,
)
from runtime.sim.geometry import EntityGeometry, quat_from_yaw
from runtime.sim.particles import FRICTION as PARTICLE_FRICTION
from runtime.sim.particles import SOLREF as PARTICLE_SOLREF
from runtime.sim.particles import ParticleSet
from runtime.sim.robots.base import Robot

TABLE_THICKNESS_M = 0.04


def _add_table(spec: mujoco.MjSpec, size_xy: tuple[float, float]) -> None:
    spec.worldbody.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[size_xy[0] / 2, size_xy[1] / 2, TABLE_THICKNESS_M / 2],
        pos=[0.0, 0.0, -TABLE_THICKNESS_M / 2],
        friction=TABLE_FRICTION,
        condim=CONDIM,
        solref=CONTACT_SOLREF,
        rgba=[0.6, 0.5, 0.4, 1.0],
    )


def entity_body_name(entity_id: str) -> str:
    return f"entity_{entity_id}"


def entity_joint_name(entity_id: str) -> str:
    return f"entity_{entity_id}_free"


def particle_body_name(entity_id: str, index: int) -> str:
    return f"entity_{entity_id}_particle_{index:03d}"


def particle_joint_name(entity_id: str, index: int) -> str:
    return f"entity_{entity_id}_particle_{index:03d}_free"


def add_particles(
    spec: mujoco.MjSpec, particles: ParticleSet, position_xy: tuple[float, float], yaw_deg: float
) -> None:
    """One free sphere per particle, at its nominal place inside the source (world frame).

    Added right after the source's body, so a replacement re-adds them where a fresh build
    would (canonical order)."""
    yaw = math.radians(float(yaw_deg))
    c, s = math.cos(yaw), math.sin(yaw)
    for index, (x, y, z) in enumerate(particles.local_centres.tolist()):
        body = spec.worldbody.add_body(
            name=particle_body_name(particles.entity_id, index),
            pos=[position_xy[0] + c * x - s * y, position_xy[1] + s * x + c * y, z],
        )
        body.add_freejoint(name=particle_joint_name(particles.entity_id, index))
        body.add_geom(
            name=f"{body.name}_geom",
            type=mujoco.mjtGeom.mjGEOM_SPHERE,
            size=[particles.radius_m, 0.0, 0.0],
            mass=particles.mass_kg,
            friction=PARTICLE_FRICTION,
            priority=1,
            condim=3,
            solref=PARTICLE_SOLREF,

            rgba=[0.2, 0.45, 0.9, 1.0],
        )


def remove_particles(spec: mujoco.MjSpec, particles: ParticleSet) -> None:
    for index in range(particles.count):
        spec.delete(spec.body(particle_body_name(particles.entity_id, index)))


def _mesh_name(entity_id: str, index: int) -> str:
    return f"entity_{entity_id}_piece_{index:03d}"


def add_entity(
    spec: mujoco.MjSpec,
    geometry: EntityGeometry,
    position_xy: tuple[float, float],
    yaw_deg: float,
    *,
    visual: bool = False,
) -> None:
    """Add one free body; its frame is the package frame (origin at the bottom centre).

    ``visual``: also add the package's visual mesh as render-only geoms (for cameras)."""
    body = spec.worldbody.add_body(
        name=entity_body_name(geometry.entity_id),
        pos=[float(position_xy[0]), float(position_xy[1]), 0.0],
        quat=quat_from_yaw(math.radians(float(yaw_deg))).tolist(),
    )
    body.add_freejoint(name=entity_joint_name(geometry.entity_id))
    common = dict(friction=geometry.friction, condim=CONDIM, solref=CONTACT_SOLREF)
    if geometry.primitive is not None:
        kind, size = geometry.primitive
        if kind == "box":
            args = dict(
                type=mujoco.mjtGeom.mjGEOM_BOX,
                size=[s / 2 for s in size],
                pos=[0.0, 0.0, size[2] / 2],
            )
        elif kind == "cylinder":
            args = dict(
                type=mujoco.mjtGeom.mjGEOM_CYLINDER,
                size=[size[0], size[1] / 2, 0.0],
                pos=[0.0, 0.0, size[1] / 2],
            )
        else:
            args = dict(
                type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[size[0], 0.0, 0.0], pos=[0.0, 0.0, size[0]]
            )
        body.add_geom(name=f"{body.name}_geom", mass=geometry.mass, **args, **common)
        return
    total = sum(piece.volume for piece in geometry.pieces)
    for index, piece in enumerate(geometry.pieces):
        mesh = spec.add_mesh(name=_mesh_name(geometry.entity_id, index))
        mesh.uservert = piece.vertices.reshape(-1)
        mesh.userface = piece.faces.reshape(-1)
        mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_CONVEX
        body.add_geom(
            name=f"{body.name}_geom_{index:03d}",
            type=mujoco.mjtGeom.mjGEOM_MESH,
            meshname=mesh.name,
            mass=geometry.mass * piece.volume / total,
            **common,
        )
    if visual and geometry.visual_path is not None:
        from runtime.sim.cameras.visuals import add_visual, load_visual_parts

        parts = load_visual_parts(geometry.visual_path, geometry.content_sha256 or "")
        add_visual(spec, body, geometry.entity_id, parts)


def remove_entity(spec: mujoco.MjSpec, geometry: EntityGeometry) -> None:
    """Delete an entity's body and the meshes it owns."""
    spec.delete(spec.body(entity_body_name(geometry.entity_id)))
    for index in range(len(geometry.pieces)):
        spec.delete(spec.mesh(_mesh_name(geometry.entity_id, index)))
    if geometry.visual_path is not None:
        from runtime.sim.cameras.visuals import remove_visual

        remove_visual(spec, geometry.entity_id)


def new_spec(
    *, timestep_s: float, table_xy: tuple[float, float], robot: Robot
) -> mujoco.MjSpec:
    """Table and robot: the part of the scene no replacement ever touches."""
    spec = mujoco.MjSpec()
    spec.modelname = "assetcast_task"
    spec.compiler.degree = False
    spec.compiler.usethread = False
    spec.option.timestep = float(timestep_s)
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = IMPRATIO
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    _add_table(spec, table_xy)
    robot.add_to_spec(spec)
    return spec


def add_entities(
    spec: mujoco.MjSpec,
    ordered: Iterable[tuple[EntityGeometry, tuple[float, float], float]],
    *,
    visual: bool = False,
    particles: Mapping[str, ParticleSet] | None = None,
) -> None:
    """Entities in the given order, each followed by the particles it holds (if any)."""
    for geometry, position, yaw in ordered:
        add_entity(spec, geometry, position, yaw, visual=visual)
        held = (particles or {}).get(geometry.entity_id)
        if held is not None:
            add_particles(spec, held, position, yaw)


def world_points(geometry: EntityGeometry, pos: np.ndarray, rot: np.ndarray) -> np.ndarray:
    return geometry.points @ rot.T + pos
