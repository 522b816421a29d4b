"""Robot kinds behind one interface (``Robot``): one module per kind.

``robot_for`` builds the robot a task names. Modules are imported on demand, so the fast
gantry never pays for loading an arm description or an inverse-kinematics solver.
"""

from __future__ import annotations

import importlib
import math

from domain.task import ROBOT_KINDS, RobotSpec, TaskSpec
from runtime.sim.errors import SceneBuildError
from runtime.sim.robots.base import Column, Robot, TcpPose, Unreachable

_MODULES = {
    "parallel_gripper": "runtime.sim.robots.parallel_gripper",
    "franka_panda": "runtime.sim.robots.franka_panda",
}
assert set(_MODULES) == set(ROBOT_KINDS), "every robot kind the task accepts needs a module"


def robot_for(spec: RobotSpec, table_xy: tuple[float, float]) -> Robot:
    """The robot of ``scene.robot`` (its module's ``build(spec, table_xy)``)."""
    module_name = _MODULES.get(spec.kind)
    if module_name is None:
        raise SceneBuildError(
            f"scene.robot.kind: unknown robot kind {spec.kind!r}; "
            f"expected one of {', '.join(sorted(_MODULES))}"
        )
    module = importlib.import_module(module_name)
    robot: Robot = module.build(spec, table_xy)
    return robot


# Heights of the TCP above the table every entity's nominal position must be reachable at,
# top-down: low enough to grasp a small object, high enough to carry one over another.
REACH_HEIGHTS_M = (0.02, 0.25)
_REACH_YAWS = (0.0, math.pi / 4, math.pi / 2, -math.pi / 4)


def check_reach(task: TaskSpec, robot: Robot | None = None, *, source: str | None = None) -> None:
    """Refuse a task whose entities' nominal positions the robot cannot reach (top-down).

    Called when an environment is built and, before anything is recorded, when a run is
    prepared, so an unreachable layout is bad input, not a failure discovered mid-run.
    """
    robot = robot or robot_for(task.scene.robot, task.scene.table.size_m)
    for index, entity in enumerate(task.scene.entities):
        x, y = entity.position_m
        for z in REACH_HEIGHTS_M:
            if not any(robot.reachable(x, y, z, robot.grasp_yaw(yaw)) for yaw in _REACH_YAWS):
                where = f"{source}: " if source else ""
                raise SceneBuildError(
                    f"{where}scene.entities[{index}].position_m: entity {entity.entity_id!r} at "
                    f"({x}, {y}) is out of reach of the {robot.kind} (no top-down gripper pose "
                    f"{z} m above the table there)"
                )


__all__ = [
    "REACH_HEIGHTS_M",
    "check_reach","Column", "Robot", "TcpPose", "Unreachable", "robot_for"]
