"""The ``parallel_gripper`` kind: a floating five-axis gantry (x, y, z, yaw, tilt) with two fingers.

Not a real robot: its joints *are* the TCP coordinates, so a pose maps to joint targets
exactly and instantly. It stays for fast unit tests of everything above the robot
(checks, recorder, collection, resume), where a real arm would only cost time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import mujoco
import numpy as np

from domain.task import RobotSpec
from runtime.sim.contact import CONDIM, CONTACT_SOLREF, FINGER_FRICTION, OBJECT_FRICTION
from runtime.sim.robots.base import Robot, TcpPose

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


def _inertial(body: mujoco.MjsBody, mass: float, inertia: float) -> None:
    body.explicitinertial = True
    body.mass = mass
    body.inertia = [inertia, inertia, inertia]
    body.gravcomp = 1.0


class ParallelGripper(Robot):
    """The gantry behind the robot interface (behaviour identical to the original built-in)."""

    kind: ClassVar[str] = "parallel_gripper"
    joint_names = ROBOT_JOINTS
    arm_joint_count = len(ARM_JOINTS)
    actuator_names = tuple(f"act_{j}" for j in ROBOT_JOINTS)
    tcp_site = "tcp"
    wrist_mount_body = "robot_tilt_link"
    finger_geoms = (("finger_left_pad",), ("finger_right_pad",))

    def __init__(self, max_opening_m: float, table_xy: tuple[float, float]) -> None:
        self.layout = GripperLayout(max_opening_m=max_opening_m)
        self.table_xy = table_xy
        self.max_opening_m = self.layout.max_opening_m
        self.finger_length_m = self.layout.finger_length_m

    def add_to_spec(self, spec: mujoco.MjSpec) -> None:
        layout, table_xy = self.layout, self.table_xy
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

    def home_qpos(self) -> np.ndarray:
        home = np.zeros(len(ROBOT_JOINTS))
        home[5:] = self.layout.max_opening_m / 2
        return home

    def finger_ctrl(self, half_opening_m: float) -> np.ndarray:
        return np.full(2, half_opening_m)

    def solve(self, pose: TcpPose, seed_qpos: np.ndarray) -> np.ndarray:
        ctrl = pose.as_array()
        ctrl[2] -= self.layout.mount_height_m
        return ctrl

    def tcp_pose(self, data: mujoco.MjData, robot_qpos: np.ndarray) -> TcpPose:
        q = robot_qpos[:5].copy()
        q[2] += self.layout.mount_height_m
        return TcpPose.from_array(q)

    def arm_ctrl_pose(self, arm_ctrl: np.ndarray) -> TcpPose | None:
        targets = np.array(arm_ctrl, dtype=np.float64)
        targets[2] += self.layout.mount_height_m
        return TcpPose.from_array(targets)

    def reachable(self, x: float, y: float, z: float, yaw: float) -> bool:
        half_x, half_y = self.table_xy[0] / 2 + 0.1, self.table_xy[1] / 2 + 0.1
        return abs(x) <= half_x and abs(y) <= half_y


def build(spec: RobotSpec, table_xy: tuple[float, float]) -> ParallelGripper:
    return ParallelGripper(spec.max_opening_m, table_xy)
