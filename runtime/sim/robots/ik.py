"""Inverse kinematics for a mounted arm: ``mink`` (differential IK as a QP, solved by ``daqp``).

mink was chosen over a hand-written damped-least-squares loop on ``mj_jacSite`` because it
treats joint limits as hard QP constraints (a DLS loop can only clamp afterwards and then
stalls at a limit), has a posture task that keeps the redundant seventh degree of freedom
near home, and is small, Apache-2.0 and well kept. It is deterministic for the same inputs,
which the byte-identical trajectories rely on.

The solver works on a model of the robot alone, in the robot's base frame, compiled once
per process: the scene's free bodies play no part in IK, and a solution is rejected when
the arm would touch itself.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import mink
import mujoco
import numpy as np

from runtime.sim.robots.base import Unreachable

POSITION_TOLERANCE_M = 1e-3
ORIENTATION_TOLERANCE_RAD = 1e-2
MAX_ITERATIONS = 60
STEP_S = 0.05
POSTURE_COST = 1e-2
# After this many iterations the posture task is dropped: it keeps solutions near home (and
# so continuous along a path), but must never be the reason a reachable pose is refused.
POSTURE_ITERATIONS = 3
DAMPING = 1e-3
SELF_PENETRATION_M = 1e-3


STATS_WINDOW = 100_000


@dataclass
class IkStats:
    """Wall-clock time of the latest solves (the benchmark reports median, p95 and share).

    Bounded, so a long collection does not grow it without end.
    """

    seconds: deque[float] = field(default_factory=lambda: deque(maxlen=STATS_WINDOW))

    def clear(self) -> None:
        self.seconds.clear()


class ArmIk:
    """Solves TCP poses (base frame) to arm joint positions with limits and self-collision."""

    def __init__(
        self, model: mujoco.MjModel, site: str, arm_joints: int, home_qpos: np.ndarray
    ) -> None:
        self.model = model
        self.site = site
        self.arm_joints = arm_joints
        self.home = np.array(home_qpos, dtype=np.float64)
        self.configuration = mink.Configuration(model, self.home.copy())
        self.frame_task = mink.FrameTask(site, "site", position_cost=1.0, orientation_cost=1.0)
        self.posture_task = mink.PostureTask(model, cost=POSTURE_COST)
        self.posture_task.set_target(self.home)
        self.limits = [mink.ConfigurationLimit(model)]
        self.fk_data = mujoco.MjData(model)
        self._site_id = model.site(site).id
        self._forward_key = b""
        self._forward_value = (np.zeros(3), np.eye(3))
        self.stats = IkStats()

    def forward(self, arm_qpos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """TCP position and rotation (base frame) of the arm joint positions ``arm_qpos``.

        Recording asks for the pose of the joint targets every control interval, and the
        targets stay put while the arm settles or the gripper moves: the last answer is kept.
        """
        key = np.asarray(arm_qpos, dtype=np.float64).tobytes()
        if key == self._forward_key:
            return self._forward_value[0].copy(), self._forward_value[1].copy()
        d = self.fk_data
        d.qpos[:] = self.home
        d.qpos[: self.arm_joints] = arm_qpos
        mujoco.mj_kinematics(self.model, d)
        value = (d.site_xpos[self._site_id].copy(), d.site_xmat[self._site_id].reshape(3, 3).copy())
        self._forward_key, self._forward_value = key, value
        return value[0].copy(), value[1].copy()

    def solve(self, position: np.ndarray, rotation: np.ndarray, seed: np.ndarray) -> np.ndarray:
        started = time.perf_counter()
        try:
            return self._solve(position, rotation, seed)
        finally:
            self.stats.seconds.append(time.perf_counter() - started)

    def _solve(self, position: np.ndarray, rotation: np.ndarray, seed: np.ndarray) -> np.ndarray:
        q = self.home.copy()
        lower = self.model.jnt_range[: self.arm_joints, 0]
        upper = self.model.jnt_range[: self.arm_joints, 1]
        q[: self.arm_joints] = np.clip(seed[: self.arm_joints], lower, upper)
        config = self.configuration
        config.update(q)
        target = mink.SE3.from_rotation_and_translation(
            mink.SO3.from_matrix(np.asarray(rotation, dtype=np.float64)),
            np.asarray(position, dtype=np.float64),
        )
        self.frame_task.set_target(target)
        with_posture = [self.frame_task, self.posture_task]
        alone = [self.frame_task]
        for iteration in range(MAX_ITERATIONS):
            error = self.frame_task.compute_error(config)
            if (
                np.linalg.norm(error[:3]) <= POSITION_TOLERANCE_M
                and np.linalg.norm(error[3:]) <= ORIENTATION_TOLERANCE_RAD
            ):
                break
            try:
                tasks = with_posture if iteration < POSTURE_ITERATIONS else alone
                velocity = mink.solve_ik(
                    config, tasks, STEP_S, "daqp", damping=DAMPING, limits=self.limits
                )
            except Exception as failure:  # an infeasible QP means no admissible step
                raise Unreachable(f"IK step failed: {failure}") from None
            config.integrate_inplace(velocity, STEP_S)
        else:
            error = self.frame_task.compute_error(config)
            raise Unreachable(
                f"IK did not converge: {np.linalg.norm(error[:3]) * 1000:.1f} mm, "
                f"{np.linalg.norm(error[3:]):.3f} rad off"
            )
        solution = config.q.copy()
        self._refuse_self_collision(solution)
        return solution[: self.arm_joints]

    def _refuse_self_collision(self, qpos: np.ndarray) -> None:
        d = self.fk_data
        d.qpos[:] = qpos
        mujoco.mj_fwdPosition(self.model, d)
        for i in range(d.ncon):
            if d.contact.dist[i] < -SELF_PENETRATION_M:
                g1, g2 = self.model.geom(int(d.contact.geom1[i])), self.model.geom(
                    int(d.contact.geom2[i])
                )
                b1 = self.model.body(int(g1.bodyid[0])).name
                b2 = self.model.body(int(g2.bodyid[0])).name
                raise Unreachable(f"the arm would collide with itself ({b1} / {b2})")
