"""The task environment: one MuJoCo scene built from a deployment and reused across batches.

Collection builds the environment once and, per batch, swaps only the role bodies
(``replace_assets``, :mod:`runtime.sim.replacement`). Building always follows the canonical
order of ``scene.py``, which makes a replaced environment step bit for bit like one built
fresh. This module builds and compiles the scene and owns its lifecycle; the rest of the
environment's interface is mixed in, one concern per module: :mod:`runtime.sim.initial_state`
(``reset``), :mod:`runtime.sim.observation` (poses, contacts, recorded observations) and
:mod:`runtime.sim.control` (driving the robot one control interval at a time).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np
import structlog

from domain.task import TaskSpec
from runtime.sim import scene as sc
from runtime.sim.control import (
    CONTROL_DECIMATION,
    SETTLE_ANGULAR_RAD_S,
    SETTLE_LINEAR_M_S,
    SETTLE_MAX_INTERVALS,
    EnvironmentControl,
)
from runtime.sim.entity_loading import deployment_task_path, load_entity_geometry
from runtime.sim.errors import SceneBuildError
from runtime.sim.geometry import EntityGeometry
from runtime.sim.initial_state import InitialState
from runtime.sim.observation import EnvironmentObservation
from runtime.sim.particles import ParticleSet, particle_sets
from runtime.sim.replacement import AssetReplacement
from runtime.sim.results import CheckResult, ProgramResult
from runtime.sim.robots import Robot, check_reach, robot_for
from runtime.taskfile import load_task

if TYPE_CHECKING:
    from runtime.sim.recorder import TrajectoryRecorder

log = structlog.get_logger(__name__)

__all__ = [
    "CONTROL_DECIMATION",
    "SETTLE_ANGULAR_RAD_S",
    "SETTLE_LINEAR_M_S",
    "SETTLE_MAX_INTERVALS",
    "TaskEnvironment",
    "load_entity_geometry",
]


class TaskEnvironment(EnvironmentObservation, EnvironmentControl, InitialState, AssetReplacement):
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
        return cls(load_task(deployment_task_path(directory)), directory, settle_steps=settle_steps)

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

    # ------------------------------------------------------------------ lifecycle

    def _require_open(self) -> None:
        if self.closed:
            raise RuntimeError("the environment is closed")

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

