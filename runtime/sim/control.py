"""Driving an environment's robot: one control interval at a time, recorded as it goes.

Every motion advances the physics in control intervals of ``CONTROL_DECIMATION`` steps, and
each interval is one recorded transition (the action applied, the observation after it),
so a trajectory's timestamps are exactly the intervals the skills ran. Mixed into
:class:`runtime.sim.environment.TaskEnvironment`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np
import structlog

from runtime.sim.robots import Robot, TcpPose, Unreachable

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


class EnvironmentControl:
    """Control methods; the attributes below are set by the environment's build, and
``tcp``/``observation`` come from :class:`runtime.sim.observation.EnvironmentObservation`."""

    model: Any
    data: Any
    robot: Robot
    program_steps: int
    _commanded: TcpPose
    _robot_qpos: np.ndarray
    _robot_dof: np.ndarray
    _robot_linear: np.ndarray
    _robot_angular: np.ndarray
    _entity_dof: dict[str, int]
    _actuators: np.ndarray
    _arm_actuators: np.ndarray
    _finger_actuators: np.ndarray

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
