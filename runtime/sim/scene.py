"""Build the MuJoCo scene of a task through ``mujoco.MjSpec``, in a canonical order.

The canonical order — table, robot, non-role entities (task order), then role
entities (task order), each entity's meshes named after the entity — is what makes
asset replacement exact: deleting the role bodies and re-adding them appends them in
the very position a fresh build would have put them, so the compiled model of a
replaced environment equals the model built fresh from the same deployment.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import mujoco
import numpy as np

from runtime.sim.geometry import EntityGeometry, quat_from_yaw

# Contact model tuned so a two-finger grasp holds: torsional friction (condim 4),
# elliptic cones with a high impedance ratio, and grippy finger pads.
CONDIM = 4
OBJECT_FRICTION = (1.0, 0.01, 0.0001)
FINGER_FRICTION = (1.5, 0.02, 0.0001)
TABLE_FRICTION = (0.8, 0.01, 0.0001)
CONTACT_SOLREF = (0.01, 1.0)
IMPRATIO = 10.0

TABLE_THICKNESS_M = 0.04

ARM_JOINTS = ("robot_x", "robot_y", "robot_z", "robot_yaw", "robot_tilt")
FINGER_JOINTS = ("finger_left", "finger_right")
ROBOT_JOINTS = ARM_JOINTS + FINGER_JOINTS


@dataclass(frozen=True)
class GripperLayout:
    """Fixed geometry of the parallel-jaw gripper; only the opening comes from the task.

    The tool centre point (TCP) is the midpoint between the fingertips' lower edges.
    Joint ``robot_z`` is measured from ``mount_height_m`` so that qpos 0 is the home pose.
    """

    max_opening_m: float
    mount_height_m: float = 0.25
    finger_length_m: float = 0.05
    finger_thickness_m: float = 0.006
    finger_depth_m: float = 0.02
    palm_height_m: float = 0.015
    finger_kp: float = 300.0
    finger_force_n: float = 25.0
    slide_kp: float = 3000.0
    hinge_kp: float = 60.0


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


def _inertial(body: mujoco.MjsBody, mass: float, inertia: float) -> None:
    body.explicitinertial = True
    body.mass = mass
    body.inertia = [inertia, inertia, inertia]
    body.gravcomp = 1.0


def _add_robot(spec: mujoco.MjSpec, layout: GripperLayout, table_xy: tuple[float, float]) -> None:
    half_x, half_y = table_xy[0] / 2 + 0.1, table_xy[1] / 2 + 0.1
    parent = spec.worldbody
    chain = (
        ("robot_x", mujoco.mjtJoint.mjJNT_SLIDE, [1, 0, 0], (-half_x, half_x)),
        ("robot_y", mujoco.mjtJoint.mjJNT_SLIDE, [0, 1, 0], (-half_y, half_y)),
        ("robot_z", mujoco.mjtJoint.mjJNT_SLIDE, [0, 0, 1], (-layout.mount_height_m, 0.3)),
        ("robot_yaw", mujoco.mjtJoint.mjJNT_HINGE, [0, 0, 1], (-math.pi, math.pi)),
        ("robot_tilt", mujoco.mjtJoint.mjJNT_HINGE, [1, 0, 0], (-2.4, 2.4)),
    )
    for index, (name, kind, axis, limits) in enumerate(chain):
        pos = [0.0, 0.0, layout.mount_height_m] if index == 0 else [0.0, 0.0, 0.0]
        body = parent.add_body(name=f"{name}_link", pos=pos)
        _inertial(body, 0.3, 0.002)
        body.add_joint(
            name=name,
            type=kind,
            axis=axis,
            range=list(limits),
            limited=mujoco.mjtLimited.mjLIMITED_TRUE,
            armature=0.01,
            damping=2.0 if kind == mujoco.mjtJoint.mjJNT_SLIDE else 0.2,
        )
        parent = body
    parent.add_site(name="tcp", size=[0.004, 0.0, 0.0])
    palm_half_y = layout.max_opening_m / 2 + layout.finger_thickness_m + 0.01
    parent.add_geom(
        name="palm",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[layout.finger_depth_m / 2, palm_half_y, layout.palm_height_m / 2],
        pos=[0.0, 0.0, layout.finger_length_m + layout.palm_height_m / 2],
        friction=OBJECT_FRICTION,
        condim=CONDIM,
        solref=CONTACT_SOLREF,
        rgba=[0.3, 0.3, 0.35, 1.0],
    )
    for name, sign in (("finger_left", 1.0), ("finger_right", -1.0)):
        finger = parent.add_body(name=f"{name}_link")
        _inertial(finger, 0.05, 0.0001)
        finger.add_joint(
            name=name,
            type=mujoco.mjtJoint.mjJNT_SLIDE,
            axis=[0, sign, 0],
            range=[0.0, layout.max_opening_m / 2],
            limited=mujoco.mjtLimited.mjLIMITED_TRUE,
            armature=0.005,
            damping=1.0,
        )
        finger.add_geom(
            name=f"{name}_pad",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[
                layout.finger_depth_m / 2,
                layout.finger_thickness_m / 2,
                layout.finger_length_m / 2,
            ],
            pos=[0.0, sign * layout.finger_thickness_m / 2, layout.finger_length_m / 2],
            friction=FINGER_FRICTION,
            condim=CONDIM,
            solref=CONTACT_SOLREF,
            rgba=[0.2, 0.2, 0.2, 1.0],
        )
    spec.add_exclude(bodyname1="finger_left_link", bodyname2="finger_right_link")
    for joint in ARM_JOINTS:
        actuator = spec.add_actuator(name=f"act_{joint}", target=joint)
        actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
        kp = layout.hinge_kp if joint in ("robot_yaw", "robot_tilt") else layout.slide_kp
        actuator.set_to_position(kp=kp, dampratio=1.0)
    for joint in FINGER_JOINTS:
        actuator = spec.add_actuator(name=f"act_{joint}", target=joint)
        actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
        actuator.set_to_position(kp=layout.finger_kp, dampratio=1.0)
        # Targets below zero squeeze harder; the force limit bounds the grip.
        actuator.ctrlrange = [-0.02, layout.max_opening_m / 2]
        actuator.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        actuator.forcerange = [-layout.finger_force_n, layout.finger_force_n]
        actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE


def entity_body_name(entity_id: str) -> str:
    return f"entity_{entity_id}"


def entity_joint_name(entity_id: str) -> str:
    return f"entity_{entity_id}_free"


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
    common = dict(friction=OBJECT_FRICTION, condim=CONDIM, solref=CONTACT_SOLREF)
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
    *, timestep_s: float, table_xy: tuple[float, float], layout: GripperLayout
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
    _add_robot(spec, layout, table_xy)
    return spec


def add_entities(
    spec: mujoco.MjSpec,
    ordered: Iterable[tuple[EntityGeometry, tuple[float, float], float]],
    *,
    visual: bool = False,
) -> None:
    for geometry, position, yaw in ordered:
        add_entity(spec, geometry, position, yaw, visual=visual)


def world_points(geometry: EntityGeometry, pos: np.ndarray, rot: np.ndarray) -> np.ndarray:
    return geometry.points @ rot.T + pos
