"""The one interface every robot kind implements, so skills never know which arm runs them.

Skills speak in Cartesian TCP poses (``TcpPose``: position, yaw of the closing axis, tilt
about the gripper's x axis). A robot turns a pose into joint targets (``solve``) — exact
for the gantry, inverse kinematics for an arm — and describes everything else the
environment needs: which joints and actuators are its own, where the tool centre point
is, how to open and close the gripper, and how to add itself to the scene's ``MjSpec``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import mujoco
import numpy as np


@dataclass(frozen=True)
class TcpPose:
    """A gripper pose in world coordinates: TCP position, yaw and tilt (radians).

    The gripper frame is ``Rz(yaw) @ Rx(tilt)`` applied to a top-down gripper whose
    fingers close along the frame's y axis; ``tilt = 0`` points the fingers straight down.
    """

    x: float
    y: float
    z: float
    yaw: float
    tilt: float

    def as_array(self) -> np.ndarray:
        return np.array([self.x, self.y, self.z, self.yaw, self.tilt], dtype=np.float64)

    @classmethod
    def from_array(cls, values: np.ndarray) -> TcpPose:
        x, y, z, yaw, tilt = (float(v) for v in values)
        return cls(x, y, z, yaw, tilt)


@dataclass(frozen=True)
class Column:
    """Name and unit of every component of one recorded array (stored in file metadata)."""

    names: tuple[str, ...]
    units: tuple[str, ...]

    def to_dict(self) -> dict[str, list[str]]:
        return {"names": list(self.names), "units": list(self.units)}


class Unreachable(Exception):
    """No joint configuration puts the TCP at the requested pose (limits, reach, collision)."""


def rotation_z(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rotation_x(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


class Robot(ABC):
    """A robot kind: model description, gripper and the pose → joint-target mapping.

    Joint and actuator names are those of the compiled scene model. ``joint_names`` lists
    the arm joints first, then the finger joints; ``actuator_names`` follows the same
    order, so ``ctrl[actuators]`` lines up with ``qpos[joints]``.
    """

    kind: ClassVar[str]
    joint_names: tuple[str, ...]
    arm_joint_count: int
    actuator_names: tuple[str, ...]
    tcp_site: str
    # A body rigidly attached to the gripper, suitable for mounting a wrist camera.
    wrist_mount_body: str
    # The body whose subtree turns rigidly with the gripper when it tilts (what a tilting
    # skill must keep clear of the scene); the wrist body unless the robot says otherwise.
    tilting_body: str | None = None
    # Geoms of each finger (left, right): grasp and release are verified through contacts.
    finger_geoms: tuple[tuple[str, ...], tuple[str, ...]]
    max_opening_m: float
    finger_length_m: float
    # Control intervals between two inverse-kinematics solves along an interpolated path.
    solve_stride: int = 1

    @property
    def finger_joint_names(self) -> tuple[str, ...]:
        return self.joint_names[self.arm_joint_count :]

    @abstractmethod
    def add_to_spec(self, spec: mujoco.MjSpec) -> None:
        """Add the robot (bodies, joints, actuators, TCP site) to the scene at its base pose."""

    @abstractmethod
    def home_qpos(self) -> np.ndarray:
        """Joint positions (``joint_names`` order) of the home configuration, gripper open."""

    @abstractmethod
    def finger_ctrl(self, half_opening_m: float) -> np.ndarray:
        """Finger actuator targets for a commanded half opening (negative squeezes harder)."""

    @abstractmethod
    def solve(self, pose: TcpPose, seed_qpos: np.ndarray) -> np.ndarray:
        """Arm joint targets that put the TCP at ``pose``; raises ``Unreachable``."""

    @abstractmethod
    def tcp_pose(self, data: mujoco.MjData, robot_qpos: np.ndarray) -> TcpPose:
        """The TCP pose the robot is actually at (``robot_qpos`` in ``joint_names`` order)."""

    def bind(self, model: mujoco.MjModel) -> None:
        """Look up ids in a freshly compiled scene model (called after every compile)."""
        return None

    def home_pose(self) -> TcpPose:
        """The TCP pose of the home configuration (where a reset leaves the gripper)."""
        pose = self.arm_ctrl_pose(self.home_qpos()[: self.arm_joint_count])
        if pose is None:
            raise NotImplementedError(f"{type(self).__name__} must define home_pose()")
        return pose

    def extra_observation(
        self, data: mujoco.MjData, robot_qpos: np.ndarray, robot_qvel: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Robot-specific arrays recorded with every observation (beyond the common ones)."""
        return {}

    def extra_action(
        self, data: mujoco.MjData, ctrl: np.ndarray, robot_qpos: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Robot-specific action representations recorded beside the raw actuator targets."""
        return {}

    def extra_columns(self) -> dict[str, Column]:
        """Names and units of the arrays of ``extra_observation`` and ``extra_action``."""
        return {}

    def grasp_yaw(self, yaw: float) -> float:
        """Of the two equivalent yaws of a symmetric two-finger grasp (``yaw`` and ``yaw`` ± pi),
        the one this robot reaches most naturally; ``yaw`` is in (-pi/2, pi/2]."""
        return yaw

    def arm_ctrl_pose(self, arm_ctrl: np.ndarray) -> TcpPose | None:
        """The pose commanded by ``arm_ctrl`` when it maps back exactly (gantry), else None."""
        return None

    def reachable(self, x: float, y: float, z: float, yaw: float) -> bool:
        """Whether a top-down grasp pose at (x, y, z, yaw) can be reached from home."""
        try:
            self.solve(TcpPose(x, y, z, yaw, 0.0), self.home_qpos()[: self.arm_joint_count])
        except Unreachable:
            return False
        return True


def gripper_frame(pose: TcpPose) -> np.ndarray:
    """Rotation of the TCP frame whose z axis points out of the fingers (down at tilt 0)."""
    return rotation_z(pose.yaw) @ rotation_x(pose.tilt) @ rotation_x(math.pi)


def pose_from_frame(position: np.ndarray, rotation: np.ndarray) -> TcpPose:
    """Inverse of ``gripper_frame``: yaw and tilt of a TCP frame (fingers-out z axis)."""
    m = rotation @ rotation_x(math.pi)
    yaw = math.atan2(m[1, 0], m[0, 0])
    tilt = math.atan2(m[2, 1], m[2, 2])
    return TcpPose(float(position[0]), float(position[1]), float(position[2]), yaw, tilt)
