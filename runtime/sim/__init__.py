"""MuJoCo task environment: scene building, asset replacement, program, checks, recorder.

Names are loaded on first use (PEP 562): a caller that needs only a light submodule
(``runtime.sim.robots`` for a reach check during preparation, ``runtime.sim.errors``)
does not pay for MuJoCo's environment and torch's recorder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.lazy_exports import lazy_exports

_EXPORTS = {
    "CONTROL_DECIMATION": "runtime.sim.environment",
    "TaskEnvironment": "runtime.sim.environment",
    "CheckUnavailable": "runtime.sim.checks",
    "register_check": "runtime.sim.checks",
    "registered_checks": "runtime.sim.checks",
    "SceneBuildError": "runtime.sim.errors",
    "SceneMismatch": "runtime.sim.errors",
    "TrajectoryRecorder": "runtime.sim.recorder",
    "commit_trajectory": "runtime.sim.recorder",
    "trajectory_bytes": "runtime.sim.recorder",
    "unregistered_names": "runtime.sim.registry",
    "CheckResult": "runtime.sim.results",
    "CommitReceipt": "runtime.sim.results",
    "ProgramResult": "runtime.sim.results",
    "ReplacementInfo": "runtime.sim.results",
    "SkillResult": "runtime.sim.results",
    "checks_accept": "runtime.sim.results",
    "register_skill": "runtime.sim.skills",
    "registered_skills": "runtime.sim.skills",
}

if TYPE_CHECKING:
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


__getattr__ = lazy_exports(__name__, _EXPORTS)


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
