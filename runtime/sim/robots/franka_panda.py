"""The ``franka_panda`` kind: a Franka Emika Panda (7 DoF) with the Panda hand, on the table.

The description comes from the ``gymnasium-robotics`` wheel (Apache-2.0, installed with the
project; never downloaded at run time): ``envs/assets/kitchen_franka/franka_assets`` ships
the kinematic chain, collision and visual meshes and position actuators with the real
Franka torque limits as ``mujocoinclude`` fragments. We compose them into one model,
rename joints/actuators/bodies to stable short names, add gravity compensation
(``gravcomp`` on every link, routed through the actuators with ``actgravcomp``; without
it the arm sags ~5 cm under load) and a TCP site between the fingertips, then attach it to
the scene at the task's base pose. The package was chosen over robosuite because it
installs with ordinary dependencies (robosuite pins an old mink, numba and opencv and
must be installed with ``--no-deps``).
"""

from __future__ import annotations

import functools
import importlib.util
import math
import re
from pathlib import Path
from typing import ClassVar

import mujoco
import numpy as np

from domain.task import RobotSpec
from runtime.sim.errors import SceneBuildError
from runtime.sim.robots import panda_visual
from runtime.sim.robots.base import (
    Column,
    Robot,
    TcpPose,
    gripper_frame,
    pose_from_frame,
    rotation_z,
)
from runtime.sim.robots.ik import ArmIk

PREFIX = "panda_"
ARM_JOINTS = tuple(f"joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("finger_joint1", "finger_joint2")
HOME_ARM = (0.0, -0.785, 0.0, -2.356, 0.0, 0.0, 0.785)
FINGER_STROKE_M = 0.04  # per finger: the Panda hand opens 8 cm
HAND_OFFSET_M = 0.107  # flange to hand base along link7's z
FINGER_BASE_M = 0.1654  # link7 origin to the finger bodies
FINGER_LENGTH_M = 0.0945  # finger body to the lower edge of the fingertip pads
HAND_QUAT = (0.92388, 0.0, 0.0, -0.382683)  # the hand is turned -45 deg about the flange axis


def _description_dir() -> Path:
    spec = importlib.util.find_spec("gymnasium_robotics")
    if spec is None or not spec.submodule_search_locations:
        raise SceneBuildError(
            "scene.robot.kind: franka_panda needs the gymnasium-robotics package "
            "(a project dependency; reinstall with `make install`)"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    directory = root / "envs" / "assets" / "kitchen_franka" / "franka_assets"
    if not (directory / "chain.xml").is_file():
        raise SceneBuildError(f"scene.robot.kind: the Panda description is missing in {directory}")
    return directory


def _fragment(directory: Path, name: str) -> str:
    text = (directory / name).read_text(encoding="utf-8")
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r'\s+user="[^"]*"', "", text)  # controller metadata of the original env
    text = re.sub(r"<size[^>]*/>", "", text)
    return re.sub(r"</?mujocoinclude>", "", text)


@functools.cache
def _description_xml() -> str:
    directory = _description_dir()
    assets = _fragment(directory, "assets.xml").replace(
        'meshdir="franka_assets/meshes"', f'meshdir="{directory / "meshes"}"'
    )
    return (
        "<mujoco model='panda'>"
        f"{assets}{_fragment(directory, 'actuator.xml')}"
        f"<worldbody>{_fragment(directory, 'chain.xml')}</worldbody></mujoco>"
    )


VISUAL_SETS = ("decimated", "original")


def _use_visuals(spec: mujoco.MjSpec, visuals: str) -> None:
    """Point the visual meshes at the decimated set (``runtime/sim/robots/panda_visual``).

    ``original`` keeps the wheel's full meshes (for side-by-side comparisons only); both sets
    are render-only geoms of zero mass, so physics is the same with either."""
    if visuals == "original":
        return
    if visuals not in VISUAL_SETS:
        raise ValueError(f"unknown Panda visual set {visuals!r}")
    files = panda_visual.verified_files()
    for mesh in spec.meshes:
        name = mesh.name.removesuffix("_viz")
        if mesh.name.endswith("_viz") and name in files:
            mesh.file = str(files[name])


def _robot_spec(visuals: str = "decimated") -> mujoco.MjSpec:
    """The Panda alone, renamed, with gravity compensation, a hand body and a TCP site."""
    spec = mujoco.MjSpec.from_string(_description_xml())
    _use_visuals(spec, visuals)
    for index, joint in enumerate(spec.joints):
        joint.name = (ARM_JOINTS + FINGER_JOINTS)[index]
        joint.actgravcomp = True
    for index, actuator in enumerate(spec.actuators):
        actuator.name = f"act_{(ARM_JOINTS + FINGER_JOINTS)[index]}"
        actuator.target = (ARM_JOINTS + FINGER_JOINTS)[index]
    for body in spec.bodies:
        if body.name.startswith("panda0_"):
            body.name = body.name.removeprefix("panda0_")
        body.gravcomp = 1.0
    for side in ("leftfinger", "rightfinger"):
        pads = [g for g in spec.body(side).geoms if g.contype != 0]
        for index, geom in enumerate(pads):
            geom.name = f"{side}_pad_{index:02d}"
    link7 = spec.body("link7")
    hand = link7.add_body(name="hand", pos=[0.0, 0.0, HAND_OFFSET_M], quat=list(HAND_QUAT))
    hand.add_site(
        name="tcp", pos=[0.0, 0.0, FINGER_BASE_M + FINGER_LENGTH_M - HAND_OFFSET_M], size=[0.005]
    )
    for site in list(spec.sites):
        if site.name == "end_effector":
            spec.delete(site)
    return spec


@functools.cache
def _ik_model() -> mujoco.MjModel:
    """The robot alone at the origin (its base frame), for IK and forward kinematics."""
    return _robot_spec().compile()


def _finger_geom_names() -> tuple[tuple[str, ...], tuple[str, ...]]:
    model = _ik_model()
    names = [model.geom(i).name for i in range(model.ngeom)]
    return (
        tuple(n for n in names if n.startswith("leftfinger_pad_")),
        tuple(n for n in names if n.startswith("rightfinger_pad_")),
    )


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi


def _quat_from_matrix(rotation: np.ndarray) -> np.ndarray:
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(rotation, dtype=np.float64).reshape(-1))
    return quat


def _rotation_vector(rotation: np.ndarray) -> np.ndarray:
    quat = _quat_from_matrix(rotation)
    velocity = np.zeros(3)
    mujoco.mju_quat2Vel(velocity, quat, 1.0)
    return velocity


class FrankaPanda(Robot):
    """Franka Panda with the Panda hand; poses go through ``ArmIk`` (mink)."""

    kind: ClassVar[str] = "franka_panda"
    joint_names = tuple(PREFIX + j for j in ARM_JOINTS + FINGER_JOINTS)
    arm_joint_count = len(ARM_JOINTS)
    actuator_names = tuple(f"{PREFIX}act_{j}" for j in ARM_JOINTS + FINGER_JOINTS)
    tcp_site = PREFIX + "tcp"
    wrist_mount_body = PREFIX + "hand"
    tilting_body = PREFIX + "link7"  # the flange link turns with the hand
    finger_length_m = FINGER_LENGTH_M
    solve_stride = 8
    visual_set: ClassVar[str] = "decimated"  # "original": the wheel's full visual meshes

    def __init__(
        self, base_xy: tuple[float, float], base_yaw_deg: float, max_opening_m: float
    ) -> None:
        self.max_opening_m = max_opening_m
        self.base_position = np.array([base_xy[0], base_xy[1], 0.0])
        self.base_yaw = math.radians(base_yaw_deg)
        self.base_rotation = rotation_z(self.base_yaw)
        self.ik = ArmIk(_ik_model(), "tcp", len(ARM_JOINTS), self._home_full())
        left, right = _finger_geom_names()
        self.finger_geoms = (
            tuple(PREFIX + n for n in left),
            tuple(PREFIX + n for n in right),
        )
        self._site_id = -1

    def _home_full(self) -> np.ndarray:
        return np.array(HOME_ARM + (FINGER_STROKE_M, FINGER_STROKE_M))

    # ------------------------------------------------------------------ scene

    def add_to_spec(self, spec: mujoco.MjSpec) -> None:
        frame = spec.worldbody.add_frame(
            pos=self.base_position.tolist(),
            quat=[math.cos(self.base_yaw / 2), 0.0, 0.0, math.sin(self.base_yaw / 2)],
        )
        frame.attach_body(_robot_spec(self.visual_set).body("link0"), PREFIX, "")
        # The base stands on the table: their touching faces are not a collision.
        spec.add_exclude(bodyname1="world", bodyname2=PREFIX + "link0")

    def bind(self, model: mujoco.MjModel) -> None:
        self._site_id = model.site(self.tcp_site).id

    # ------------------------------------------------------------------ configuration

    def home_qpos(self) -> np.ndarray:
        return self._home_full()

    def home_pose(self) -> TcpPose:
        return self._world_pose(*self.ik.forward(np.array(HOME_ARM)))

    def grasp_yaw(self, yaw: float) -> float:
        """The equivalent yaw closest to the home hand yaw: the wrist turns the least."""
        natural = _wrap(self.base_yaw - math.pi / 4)
        # Unwrapped on purpose: the wrist turns from its current yaw to the returned value
        # the direct way, so a value a full turn away would wind the wrist past its limit.
        return min((yaw + k * math.pi for k in (-2, -1, 0, 1, 2)), key=lambda a: abs(a - natural))

    def finger_ctrl(self, half_opening_m: float) -> np.ndarray:
        return np.full(2, min(max(half_opening_m, 0.0), self.max_opening_m / 2))

    # ------------------------------------------------------------------ frames

    def _to_base(self, position: np.ndarray, rotation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        inverse = self.base_rotation.T
        return inverse @ (position - self.base_position), inverse @ rotation

    def _world_pose(self, position: np.ndarray, rotation: np.ndarray) -> TcpPose:
        return pose_from_frame(
            self.base_rotation @ position + self.base_position, self.base_rotation @ rotation
        )

    def solve(self, pose: TcpPose, seed_qpos: np.ndarray) -> np.ndarray:
        position, rotation = self._to_base(
            np.array([pose.x, pose.y, pose.z]), gripper_frame(pose)
        )
        return self.ik.solve(position, rotation, np.asarray(seed_qpos))

    def tcp_pose(self, data: mujoco.MjData, robot_qpos: np.ndarray) -> TcpPose:
        position = data.site_xpos[self._site_id]
        rotation = data.site_xmat[self._site_id].reshape(3, 3)
        return pose_from_frame(position, rotation)

    def _tcp_in_base(self, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray]:
        return self._to_base(
            data.site_xpos[self._site_id], data.site_xmat[self._site_id].reshape(3, 3)
        )

    # ------------------------------------------------------------------ recording

    def extra_observation(
        self, data: mujoco.MjData, robot_qpos: np.ndarray, robot_qvel: np.ndarray
    ) -> dict[str, np.ndarray]:
        position, rotation = self._tcp_in_base(data)
        state = np.concatenate([robot_qpos[:7], [robot_qpos[7] + robot_qpos[8]]])
        return {
            "observation.state": state,
            "observation.velocity": robot_qvel[:7].copy(),
            "observation.ee_pose": np.concatenate([position, _quat_from_matrix(rotation)]),
        }

    def extra_action(
        self, data: mujoco.MjData, ctrl: np.ndarray, robot_qpos: np.ndarray
    ) -> dict[str, np.ndarray]:
        width = float(ctrl[7] + ctrl[8])
        current_position, current_rotation = self._tcp_in_base(data)
        target_position, target_rotation = self.ik.forward(ctrl[:7])
        delta_rotation = _rotation_vector(target_rotation @ current_rotation.T)
        return {
            "action.joint_position": np.concatenate([ctrl[:7], [width]]),
            "action.ee_delta": np.concatenate(
                [target_position - current_position, delta_rotation, [width]]
            ),
        }

    def extra_columns(self) -> dict[str, Column]:
        joints = self.joint_names[:7]
        return {
            "observation.state": Column(joints + ("gripper_width",), ("rad",) * 7 + ("m",)),
            "observation.velocity": Column(joints, ("rad/s",) * 7),
            "observation.ee_pose": Column(
                ("x", "y", "z", "qw", "qx", "qy", "qz"), ("m",) * 3 + ("1",) * 4
            ),
            "action.joint_position": Column(
                joints + ("gripper_width",), ("rad",) * 7 + ("m",)
            ),
            "action.ee_delta": Column(
                ("dx", "dy", "dz", "drx", "dry", "drz", "gripper_width"),
                ("m",) * 3 + ("rad",) * 3 + ("m",),
            ),
        }


def build(spec: RobotSpec, table_xy: tuple[float, float]) -> FrankaPanda:
    if spec.base_position_m is None:
        raise SceneBuildError("scene.robot.base_position_m: franka_panda needs a base position")
    return FrankaPanda(spec.base_position_m, spec.base_yaw_deg, spec.max_opening_m)
