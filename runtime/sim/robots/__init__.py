"""Robot kinds behind one interface (``Robot``): one module per kind.

``robot_for`` builds the robot a task names. Modules are imported on demand, so the fast
gantry never pays for loading an arm description or an inverse-kinematics solver.
"""

from __future__ import annotations

import importlib

from domain.task import ROBOT_KINDS, RobotSpec
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


__all__ = ["Column", "Robot", "TcpPose", "Unreachable", "robot_for"]
