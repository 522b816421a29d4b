"""Putting an environment in an episode's initial state, or back to its nominal one.

An episode starts from ``reset(seed)``: the robot home, every entity at its task pose with
pose noise on the role entities drawn from the seed (and only from it), particles at rest
inside their source, then ``settle_steps`` of physics. ``reset(None)`` is the return to the
nominal scene after an episode: no noise, no settling, nothing random. Mixed into
:class:`runtime.sim.environment.TaskEnvironment`.
"""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np

from domain.task import TaskSpec
from runtime.sim.geometry import quat_from_yaw
from runtime.sim.particles import ParticleSet
from runtime.sim.robots import Robot, TcpPose


class InitialState:
    """``reset`` and the particles' placement; the attributes below are set by the build,
``_require_open`` comes from the environment."""

    task: TaskSpec
    model: Any
    data: Any
    robot: Robot
    settle_steps: int
    order: list[str]
    role_order: list[str]
    particles: dict[str, ParticleSet]
    held: str | None
    picked_from: dict[str, tuple[float, float, float]]
    program_steps: int
    _commanded: TcpPose
    _robot_qpos: np.ndarray
    _arm_actuators: np.ndarray
    _finger_actuators: np.ndarray
    _entity_qpos: dict[str, int]
    _particle_qpos: dict[str, np.ndarray]

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
