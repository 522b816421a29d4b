"""MuJoCo task environment: scene building, asset replacement, program, checks, recorder."""

from runtime.sim.checks import CheckUnavailable, register_check, registered_checks
from runtime.sim.environment import CONTROL_DECIMATION, TaskEnvironment
from runtime.sim.errors import SceneBuildError, SceneMismatch
from runtime.sim.recorder import TrajectoryRecorder, commit_trajectory, trajectory_bytes
from runtime.sim.registry import unregistered_names
from runtime.sim.results import (
    CheckResult,
    CommitReceipt,
    ProgramResult,
    ReplacementInfo,
    SkillResult,
    checks_accept,
)
from runtime.sim.skills import register_skill, registered_skills

__all__ = [
    "CONTROL_DECIMATION",
    "CheckResult",
    "CheckUnavailable",
    "CommitReceipt",
    "ProgramResult",
    "ReplacementInfo",
    "SceneBuildError",
    "SceneMismatch",
    "SkillResult",
    "TaskEnvironment",
    "TrajectoryRecorder",
    "checks_accept",
    "commit_trajectory",
    "register_check",
    "register_skill",
    "registered_checks",
    "registered_skills",
    "trajectory_bytes",
    "unregistered_names",
]
