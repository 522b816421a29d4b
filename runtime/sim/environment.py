"""The task environment: one MuJoCo scene built from a deployment and reused across batches.

Collection builds the environment once and, per batch, swaps only the role bodies
(``replace_assets``). The robot, the table and every non-role entity must stay
identical, so a replacement deployment that changes them is refused *before* the
model is touched. Building always follows the canonical order of ``scene.py``, which
makes a replaced environment step bit for bit like one built fresh.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np
import structlog

from domain.task import EntitySpec, PackageAsset, TaskSpec
from runtime.sim import physics_state
from runtime.sim import scene as sc
from runtime.sim.errors import SceneBuildError, SceneMismatch
from runtime.sim.geometry import (
    EntityGeometry,
    package_geometry,
    primitive_geometry,
    quat_from_yaw,
    rotation_from_quat,
)
from runtime.sim.particles import ParticleSet, particle_sets
from runtime.sim.results import CheckResult, ProgramResult, ReplacementInfo
from runtime.sim.robots import Column, Robot, TcpPose, Unreachable, check_reach, robot_for
from runtime.taskfile import load_task

if TYPE_CHECKING:
    from runtime.sim.recorder import TrajectoryRecorder

log = structlog.get_logger(__name__)

CONTROL_DECIMATION = 10  # physics steps per control/recording interval
# A skill ends settled: every entity and robot joint below half the default ``at_rest``
# tolerances (0.02 m/s, 0.3 rad/s), so a completed program leaves a scene the final checks
# can judge at rest. Bounded: something still rolling after 2 s of simulated time is a
# genuine physical outcome for the checks to reject, not something to wait out.
SETTLE_LINEAR_M_S = 0.01
SETTLE_ANGULAR_RAD_S = 0.15
SETTLE_MAX_INTERVALS = 100


def load_entity_geometry(task: TaskSpec, entity: EntitySpec, base_dir: Path) -> EntityGeometry:
    density = task.scene.physics.density_kg_m3
    if isinstance(entity.asset, PackageAsset):
        return package_geometry(entity.entity_id, base_dir / entity.asset.package, density)
    return primitive_geometry(
        entity.entity_id, entity.asset.primitive, entity.asset.size_m, density
    )


def _task_path(deployment_dir: Path) -> Path:
    path = Path(deployment_dir) / "task.yaml"
    if not path.is_file():
        raise SceneBuildError(f"{path}: deployment has no task.yaml")
    return path


class TaskEnvironment:
    """A MuJoCo tabletop scene with one robot (``scene.robot.kind``), driven by a task program."""

    def __init__(self, task: TaskSpec, deployment_dir: Path, *, settle_steps: int = 0) -> None:
        if type(settle_steps) is not int or settle_steps < 0:
            raise ValueError("settle_steps must be a non-negative integer")
        self.settle_steps = settle_steps
        self.visual = bool(task.cameras)  # render-only meshes are built only for cameras
        self.robot: Robot = robot_for(task.scene.robot, task.scene.table.size_m)
        check_reach(task, self.robot, source=str(Path(deployment_dir) / "task.yaml"))
        geometries = {
            e.entity_id: load_entity_geometry(task, e, deployment_dir) for e in task.scene.entities
        }
        self._adopt(task, deployment_dir, geometries)
        self.spec = sc.new_spec(
            timestep_s=task.scene.physics.timestep_s,
            table_xy=task.scene.table.size_m,
            robot=self.robot,
        )
        sc.add_entities(
            self.spec, self._placements(self.order), visual=self.visual, particles=self.particles
        )
        self._compile()
        self.constructions = 1
        self.replacements = 0
        self.closed = False
        self.held: str | None = None
        # entity -> (x, y, bottom z) of its world AABB where it was picked up; pour puts it back
        self.picked_from: dict[str, tuple[float, float, float]] = {}
        self.program_steps = 0
        self._commanded = self.robot.home_pose()
        log.info("sim.environment_built", task_id=task.task_id, deployment=str(deployment_dir))

    # ------------------------------------------------------------------ building

    @classmethod
    def from_deployment(
        cls, deployment_dir: Path | str, *, settle_steps: int = 0
    ) -> TaskEnvironment:
        directory = Path(deployment_dir)
        return cls(load_task(_task_path(directory)), directory, settle_steps=settle_steps)

    def _adopt(
        self, task: TaskSpec, deployment_dir: Path, geometries: dict[str, EntityGeometry]
    ) -> None:
        self.task = task
        self.deployment_dir = Path(deployment_dir)
        self.roles = task.role_entities()
        role_ids = set(self.roles.values())
        entities = [e.entity_id for e in task.scene.entities]
        self.role_order = [e for e in entities if e in role_ids]
        self.kept_order = [e for e in entities if e not in role_ids]
        self.order = self.kept_order + self.role_order  # canonical build order
        self.geometries = geometries
        self.particles: dict[str, ParticleSet] = particle_sets(task, geometries)

    def _placements(
        self, entity_ids: Sequence[str]
    ) -> list[tuple[EntityGeometry, tuple[float, float], float]]:
        return [
            (
                self.geometries[eid],
                self.task.entity(eid).position_m,
                self.task.entity(eid).yaw_deg,
            )
            for eid in entity_ids
        ]

    def _compile(self) -> None:
        try:
            self.model = self.spec.compile()
        except Exception as error:
            raise SceneBuildError(
                f"{self.deployment_dir}: MuJoCo rejected the scene ({error})"
            ) from error
        self.data = mujoco.MjData(self.model)
        m = self.model
        joints = [m.joint(j).id for j in self.robot.joint_names]
        self._robot_qpos = np.array([m.jnt_qposadr[j] for j in joints], dtype=np.intp)
        self._robot_dof = np.array([m.jnt_dofadr[j] for j in joints], dtype=np.intp)
        slide = np.array([m.jnt_type[j] == mujoco.mjtJoint.mjJNT_SLIDE for j in joints])
        self._robot_linear = np.flatnonzero(slide)
        self._robot_angular = np.flatnonzero(~slide)
        self._fingers = self._robot_qpos[self.robot.arm_joint_count :]
        self._entity_qpos = {
            eid: int(m.jnt_qposadr[m.joint(sc.entity_joint_name(eid)).id]) for eid in self.order
        }
        self._entity_dof = {
            eid: int(m.jnt_dofadr[m.joint(sc.entity_joint_name(eid)).id]) for eid in self.order
        }
        self._entity_body = {eid: m.body(sc.entity_body_name(eid)).id for eid in self.order}
        self._particle_qpos = {
            eid: np.array(
                [
                    int(m.jnt_qposadr[m.joint(sc.particle_joint_name(eid, i)).id])
                    for i in range(held.count)
                ],
                dtype=np.intp,
            )
            for eid, held in self.particles.items()
        }
        # qpos indices of every entity's free-joint pose (x y z qw qx qy qz), one row per
        # entity in ``order``: an observation, taken every control interval, gathers them
        # with one index instead of a per-entity slice and stack.
        self._entity_pose_qpos = np.array(
            [self._entity_qpos[eid] for eid in self.order], dtype=np.intp
        )[:, None] + np.arange(7, dtype=np.intp)
        self._actuators = np.array(
            [m.actuator(a).id for a in self.robot.actuator_names], dtype=np.intp
        )
        self._arm_actuators = self._actuators[: self.robot.arm_joint_count]
        self._finger_actuators = self._actuators[self.robot.arm_joint_count :]
        self._finger_geoms = tuple(
            frozenset(m.geom(g).id for g in side) for side in self.robot.finger_geoms
        )
        self.robot.bind(m)

    def _check_compatible(self, task: TaskSpec, directory: Path) -> dict[str, EntityGeometry]:
        """Refuse a deployment that changes anything but the role bodies; load its roles."""
        where = f"{directory / 'task.yaml'}"
        if task.task_id != self.task.task_id:
            raise SceneMismatch(
                f"{where}: task_id {task.task_id!r} differs from the environment's "
                f"{self.task.task_id!r}"
            )
        for name in ("table", "robot", "physics"):
            if getattr(task.scene, name) != getattr(self.task.scene, name):
                raise SceneMismatch(
                    f"{where}: scene.{name} differs from the environment's; only role assets "
                    "may change between batches"
                )
        if task.role_entities() != self.roles:
            raise SceneMismatch(f"{where}: asset_requirements roles differ from the environment's")
        new_ids = [e.entity_id for e in task.scene.entities]
        if sorted(new_ids) != sorted(self.order):
            raise SceneMismatch(f"{where}: scene.entities ids differ from the environment's")
        for eid in self.kept_order:
            old, new = self.task.entity(eid), task.entity(eid)
            if (old.position_m, old.yaw_deg) != (new.position_m, new.yaw_deg):
                raise SceneMismatch(f"{where}: non-role entity {eid!r} moved")
            if load_entity_geometry(task, new, directory).identity != self.geometries[eid].identity:
                raise SceneMismatch(f"{where}: non-role entity {eid!r} has a different asset")
        return {
            eid: load_entity_geometry(task, task.entity(eid), directory) for eid in self.role_order
        }

    def replace_assets(self, deployment_dir: Path | str) -> ReplacementInfo:
        """Swap the role bodies for those of ``deployment_dir`` on this same environment."""
        self._require_open()
        directory = Path(deployment_dir)
        task = load_task(_task_path(directory))
        new_roles = self._check_compatible(task, directory)
        old_geometries = dict(self.geometries)
        self._remove_roles()
        geometries = {**{k: old_geometries[k] for k in self.kept_order}, **new_roles}
        previous = (self.task, self.deployment_dir, old_geometries)
        self._adopt(task, directory, geometries)
        self._add_roles()
        try:
            self._compile()
        except SceneBuildError as error:
            # Put the old bodies back so the environment stays usable for the caller.
            self._remove_roles()
            self._adopt(*previous)
            self._add_roles()
            try:
                self._compile()
            except SceneBuildError as restore_error:
                error.add_note(f"restoring the previous role bodies also failed: {restore_error}")
            raise
        self.replacements += 1
        self.held = None
        self.picked_from = {}
        info = ReplacementInfo(
            roles_replaced=tuple(sorted(self.roles)), entities_kept=tuple(self.kept_order)
        )
        log.info("sim.assets_replaced", deployment=str(directory), roles=info.roles_replaced)
        return info

    def _remove_roles(self) -> None:
        for eid in self.role_order:
            sc.remove_entity(self.spec, self.geometries[eid])
            if eid in self.particles:
                sc.remove_particles(self.spec, self.particles[eid])

    def _add_roles(self) -> None:
        sc.add_entities(
            self.spec,
            self._placements(self.role_order),
            visual=self.visual,
            particles=self.particles,
        )

    # ------------------------------------------------------------------ state

    def _require_open(self) -> None:
        if self.closed:
            raise RuntimeError("the environment is closed")

    def reset(self, seed: int | None) -> None:
        """Deterministic initial state: pose noise on role entities from ``seed``, then settle.

        ``seed=None`` returns the scene to its nominal state after an episode: every entity
        exactly at its task pose, robot home, no noise and no settling (nothing random, so
        no seed is needed).
        """
        self._require_open()
        physics = self.task.scene.physics
        rng = np.random.default_rng(seed) if seed is not None else None
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        home = self.robot.home_qpos()
        arm = self.robot.arm_joint_count
        d.qpos[self._robot_qpos] = home
        d.ctrl[self._arm_actuators] = home[:arm]
        d.ctrl[self._finger_actuators] = self.robot.finger_ctrl(self.robot.max_opening_m / 2)
        self._commanded = self.robot.home_pose()
        role_ids = set(self.role_order)
        for eid in self.order:
            entity = self.task.entity(eid)
            x, y = entity.position_m
            yaw = math.radians(entity.yaw_deg)
            if rng is not None and eid in role_ids:
                dx, dy = rng.uniform(-physics.pose_noise_m, physics.pose_noise_m, size=2)
                dyaw = rng.uniform(-physics.pose_noise_yaw_deg, physics.pose_noise_yaw_deg)
                x, y, yaw = x + dx, y + dy, yaw + math.radians(dyaw)
            adr = self._entity_qpos[eid]
            d.qpos[adr : adr + 3] = (x, y, 0.0)
            d.qpos[adr + 3 : adr + 7] = quat_from_yaw(yaw)
            if eid in self.particles:
                self._place_particles(eid, x, y, yaw)
        mujoco.mj_forward(m, d)
        if rng is not None and self.settle_steps:
            mujoco.mj_step(m, d, nstep=self.settle_steps)
        self.held = None
        self.picked_from = {}
        self.program_steps = 0

    def _place_particles(self, entity_id: str, x: float, y: float, yaw: float) -> None:
        """Put the source's particles at their nominal places inside it (at rest)."""
        local = self.particles[entity_id].local_centres
        c, s = math.cos(yaw), math.sin(yaw)
        world = np.column_stack(
            [x + c * local[:, 0] - s * local[:, 1], y + s * local[:, 0] + c * local[:, 1],
             local[:, 2]]
        )
        for adr, point in zip(self._particle_qpos[entity_id], world, strict=True):
            self.data.qpos[adr : adr + 3] = point
            self.data.qpos[adr + 3 : adr + 7] = (1.0, 0.0, 0.0, 0.0)

    def particle_positions(self, entity_id: str) -> np.ndarray:
        """World centres (n, 3) of the particles ``entity_id`` was filled with."""
        adrs = self._particle_qpos.get(entity_id)
        if adrs is None:
            return np.zeros((0, 3))
        return self.data.qpos[adrs[:, None] + np.arange(3)]

    def close(self) -> None:
        """Release the native model; idempotent."""
        if not self.closed:
            self.closed = True
            self.data = None  # type: ignore[assignment]
            self.model = None  # type: ignore[assignment]
            log.info("sim.environment_closed")

    def __enter__(self) -> TaskEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ observation

    def entity_pose(self, entity_id: str) -> tuple[np.ndarray, np.ndarray]:
        """World position of the entity frame (bottom centre) and its rotation matrix."""
        adr = self._entity_qpos[entity_id]
        qpos = self.data.qpos
        return qpos[adr : adr + 3].copy(), rotation_from_quat(qpos[adr + 3 : adr + 7])

    def entity_velocity(self, entity_id: str) -> tuple[np.ndarray, np.ndarray]:
        adr = self._entity_dof[entity_id]
        return self.data.qvel[adr : adr + 3].copy(), self.data.qvel[adr + 3 : adr + 6].copy()

    def entity_world_points(self, entity_id: str) -> np.ndarray:
        pos, rot = self.entity_pose(entity_id)
        return sc.world_points(self.geometries[entity_id], pos, rot)

    def entity_world_aabb(self, entity_id: str) -> tuple[np.ndarray, np.ndarray]:
        points = self.entity_world_points(entity_id)
        return points.min(axis=0), points.max(axis=0)

    def to_entity_frame(self, entity_id: str, points: np.ndarray) -> np.ndarray:
        pos, rot = self.entity_pose(entity_id)
        return (points - pos) @ rot

    def to_world(self, entity_id: str, local: np.ndarray) -> np.ndarray:
        pos, rot = self.entity_pose(entity_id)
        return np.asarray(local) @ rot.T + pos

    @property
    def layout(self) -> Robot:
        """The robot's gripper dimensions (``max_opening_m``, ``finger_length_m``)."""
        return self.robot

    def finger_width(self) -> float:
        return float(np.sum(self.data.qpos[self._fingers]))

    def tcp(self) -> np.ndarray:
        """Where the TCP is (x, y, z, yaw, tilt), from the simulated state."""
        return self.robot.tcp_pose(self.data, self.data.qpos[self._robot_qpos]).as_array()

    def robot_qpos(self) -> np.ndarray:
        return self.data.qpos[self._robot_qpos]

    def gripper_points(self) -> np.ndarray:
        """Points on every collision geom that turns with the gripper (the subtree of the
        robot's tilting body): a mesh's vertices, a primitive's 5x5x5 grid over its box (a
        grid, not corners, so what is over a target can be told from what is not). What a
        tilting motion must keep clear of the scene."""
        m, d = self.model, self.data
        mujoco.mj_kinematics(m, d)
        root = m.body(self.robot.tilting_body or self.robot.wrist_mount_body).id
        bodies = {root}
        for body in range(root + 1, m.nbody):
            if int(m.body_parentid[body]) in bodies:
                bodies.add(body)
        steps = np.linspace(-1.0, 1.0, 5)
        signs = np.array([[x, y, z] for x in steps for y in steps for z in steps])
        corners = []
        for geom in range(m.ngeom):
            if int(m.geom_bodyid[geom]) not in bodies or not (m.geom_contype[geom] or
                                                              m.geom_conaffinity[geom]):
                continue
            mesh = int(m.geom_dataid[geom])
            if m.geom_type[geom] == mujoco.mjtGeom.mjGEOM_MESH and mesh >= 0:
                start = int(m.mesh_vertadr[mesh])
                local = m.mesh_vert[start : start + int(m.mesh_vertnum[mesh])]
            else:
                centre, half = m.geom_aabb[geom][:3], m.geom_aabb[geom][3:]
                local = centre + signs * half
            corners.append(local @ d.geom_xmat[geom].reshape(3, 3).T + d.geom_xpos[geom])
        return np.concatenate(corners) if corners else np.zeros((0, 3))

    def finger_contacts(self, entity_id: str) -> tuple[int, int]:
        """Active contacts between the entity and each finger (left, right)."""
        mujoco.mj_forward(self.model, self.data)
        d, m = self.data, self.model
        body = self._entity_body[entity_id]
        counts = [0, 0]
        for i in range(d.ncon):
            g1, g2 = int(d.contact.geom1[i]), int(d.contact.geom2[i])
            if m.geom_bodyid[g1] == body:
                other = g2
            elif m.geom_bodyid[g2] == body:
                other = g1
            else:
                continue
            for side, geoms in enumerate(self._finger_geoms):
                if other in geoms:
                    counts[side] += 1
        return counts[0], counts[1]

    def observation(self) -> dict[str, np.ndarray]:
        """The state recorded every control interval (index arrays gather fresh copies)."""
        d = self.data
        return {
            "robot_qpos": d.qpos[self._robot_qpos],
            "robot_qvel": d.qvel[self._robot_dof],
            "entity_pose": d.qpos[self._entity_pose_qpos],
            "finger_width": np.array(self.finger_width()),
            "time": np.array(d.time),
            **self.robot.extra_observation(d, d.qpos[self._robot_qpos], d.qvel[self._robot_dof]),
            physics_state.KEY: physics_state.capture(self.model, d),
        }

    def record_columns(self) -> dict[str, Column]:
        """Names and units of every recorded array (stored in the trajectory metadata)."""
        joint_units = [("rad" if i in self._robot_angular else "m") for i in range(
            len(self.robot.joint_names))]
        speed_units = [u + "/s" for u in joint_units]
        pose = ("x", "y", "z", "qw", "qx", "qy", "qz")
        columns = {
            "robot_qpos": Column(self.robot.joint_names, tuple(joint_units)),
            "robot_qvel": Column(self.robot.joint_names, tuple(speed_units)),
            "entity_pose": Column(
                tuple(f"{e}.{p}" for e in self.order for p in pose),
                tuple(u for _ in self.order for u in ("m",) * 3 + ("1",) * 4),
            ),
            "finger_width": Column(("finger_width",), ("m",)),
            "timestamps": Column(("time",), ("s",)),
            "actions": Column(self.robot.actuator_names, tuple(joint_units)),
            physics_state.KEY: Column(
                physics_state.names(self.model),
                physics_state.units(physics_state.names(self.model)),
            ),
        }
        columns.update(self.robot.extra_columns())
        return columns

    def asset_identities(self) -> dict[str, dict[str, Any]]:
        """Role -> entity, asset id and content digest of the bodies currently in the scene."""
        return {
            role: {
                "entity_id": eid,
                "asset_id": self.geometries[eid].asset_id,
                "content_sha256": self.geometries[eid].content_sha256,
            }
            for role, eid in self.roles.items()
        }

    # ------------------------------------------------------------------ control

    def step_control(self, recorder: TrajectoryRecorder | None) -> None:
        """Advance one control interval with the current ctrl, recording the transition."""
        action: dict[str, np.ndarray] | None = None
        if recorder is not None:
            d = self.data
            ctrl = d.ctrl[self._actuators]
            action = {
                "actions": ctrl,
                **self.robot.extra_action(d, ctrl, d.qpos[self._robot_qpos]),
            }
        mujoco.mj_step(self.model, self.data, nstep=CONTROL_DECIMATION)
        self.program_steps += CONTROL_DECIMATION
        if recorder is not None and action is not None:
            recorder.record(action, self.observation())

    def arm_targets(self) -> np.ndarray:
        """The TCP pose last commanded (x, y, z, yaw, tilt)."""
        exact = self.robot.arm_ctrl_pose(self.data.ctrl[self._arm_actuators])
        return (exact or self._commanded).as_array()

    def move_tcp(
        self,
        recorder: TrajectoryRecorder | None,
        *,
        x: float | None = None,
        y: float | None = None,
        z: float | None = None,
        yaw: float | None = None,
        tilt: float | None = None,
        speed_m_s: float = 0.3,
        speed_rad_s: float = 2.0,
        tolerance_m: float = 0.003,
        max_settle_intervals: int = 40,
        waypoint: str = "target",
    ) -> bool:
        """Interpolate the TCP to the goal, then wait (bounded) until it arrives.

        The path is interpolated in pose space, one target per control interval; the robot
        turns every ``solve_stride``-th target into joint targets (exact for the gantry,
        inverse kinematics for an arm) and the joint targets in between are interpolated.
        Raises ``Unreachable`` (naming ``waypoint``) when a pose on the way cannot be reached.
        """
        start = self.arm_targets()
        goal = start.copy()
        for index, value in enumerate((x, y, z, yaw, tilt)):
            if value is not None:
                goal[index] = value
        interval = self.model.opt.timestep * CONTROL_DECIMATION
        linear = float(np.linalg.norm(goal[:3] - start[:3])) / speed_m_s
        angular = float(np.max(np.abs(goal[3:] - start[3:]))) / speed_rad_s
        count = max(1, math.ceil(max(linear, angular) / interval))
        stride = self.robot.solve_stride
        arm = self.robot.arm_joint_count
        previous_k, previous_q = 0, self.data.ctrl[self._arm_actuators].copy()
        for k in range(1, count + 1):
            if k % stride and k != count:
                continue
            pose = TcpPose.from_array(start + (goal - start) * (k / count))
            try:
                solved = self.robot.solve(pose, previous_q)
            except Unreachable as error:
                log.info("sim.unreachable", waypoint=waypoint, pose=pose, reason=str(error))
                raise Unreachable(f"unreachable {waypoint} pose") from error
            for j in range(previous_k + 1, k + 1):
                if j == k:
                    self.data.ctrl[self._arm_actuators] = solved
                else:
                    fraction = (j - previous_k) / (k - previous_k)
                    target = previous_q + (solved - previous_q) * fraction
                    self.data.ctrl[self._arm_actuators] = target
                self.step_control(recorder)
            previous_k, previous_q = k, solved[:arm]
            self._commanded = pose
        for _ in range(max_settle_intervals):
            error = self.tcp() - goal
            error[3:] = (error[3:] + math.pi) % (2 * math.pi) - math.pi
            if np.linalg.norm(error[:3]) <= tolerance_m and np.max(np.abs(error[3:])) <= 0.02:
                return True
            self.step_control(recorder)
        return False

    def can_reach(self, **changes: float) -> bool:
        """Whether the commanded TCP pose with ``changes`` (x, y, z, yaw, tilt) is reachable."""
        pose = self.arm_targets()
        for index, name in enumerate(("x", "y", "z", "yaw", "tilt")):
            if name in changes:
                pose[index] = changes[name]
        try:
            self.robot.solve(TcpPose.from_array(pose), self.data.ctrl[self._arm_actuators].copy())
        except Unreachable:
            return False
        return True

    def set_fingers(
        self, recorder: TrajectoryRecorder | None, half_opening: float, intervals: int
    ) -> None:
        self.data.ctrl[self._finger_actuators] = self.robot.finger_ctrl(half_opening)
        for _ in range(intervals):
            self.step_control(recorder)

    def hold(self, recorder: TrajectoryRecorder | None, intervals: int) -> None:
        for _ in range(intervals):
            self.step_control(recorder)

    def motion(self) -> tuple[float, float]:
        """Fastest linear (m/s) and angular (rad/s) speed over every entity and robot joint."""
        qvel = self.data.qvel
        linear = [float(np.linalg.norm(qvel[a : a + 3])) for a in self._entity_dof.values()]
        angular = [float(np.linalg.norm(qvel[a + 3 : a + 6])) for a in self._entity_dof.values()]
        robot = np.abs(qvel[self._robot_dof])
        linear.extend(robot[self._robot_linear].tolist())
        angular.extend(robot[self._robot_angular].tolist())
        return max(linear), max(angular)

    def settle(
        self,
        recorder: TrajectoryRecorder | None,
        *,
        max_intervals: int = SETTLE_MAX_INTERVALS,
        linear_m_s: float = SETTLE_LINEAR_M_S,
        angular_rad_s: float = SETTLE_ANGULAR_RAD_S,
    ) -> bool:
        """Hold the current targets until the scene is still (bounded); True when it is."""
        for _ in range(max_intervals):
            linear, angular = self.motion()
            if linear <= linear_m_s and angular <= angular_rad_s:
                return True
            self.step_control(recorder)
        linear, angular = self.motion()
        return linear <= linear_m_s and angular <= angular_rad_s

    # ------------------------------------------------------------------ program and checks

    def run_program(self, recorder: TrajectoryRecorder | None = None) -> ProgramResult:
        from runtime.sim.skills import run_program

        self._require_open()
        return run_program(self, recorder)

    def run_checks(self, specs: Sequence[Any]) -> tuple[CheckResult, ...]:
        from runtime.sim.checks import run_checks

        self._require_open()
        mujoco.mj_forward(self.model, self.data)
        return run_checks(self, specs)

    def contacts(self) -> list[Mapping[str, Any]]:
        """Active contacts after the last forward pass: geom names and signed distance."""
        d, m = self.data, self.model
        return [
            {
                "geom1": m.geom(int(d.contact.geom1[i])).name,
                "geom2": m.geom(int(d.contact.geom2[i])).name,
                "dist": float(d.contact.dist[i]),
            }
            for i in range(d.ncon)
        ]
