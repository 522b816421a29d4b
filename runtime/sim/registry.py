"""Which names a task uses that no registered check or skill answers to.

Asked before a run starts: an unknown check would be judged `unavailable` and reject every
episode, and a resumed run without the user's module would silently change the verdicts
of the session it continues.
"""

from __future__ import annotations

from collections.abc import Sequence

from domain.task import CheckSpec, TaskSpec
from runtime.sim.checks import registered_checks
from runtime.sim.skills import registered_skills


def unregistered_names(
    task: TaskSpec,
    initial: Sequence[CheckSpec] | None = None,
    final: Sequence[CheckSpec] | None = None,
) -> list[str]:
    """``["check 'x'", "skill 'y'"]`` for every name the task (or the overrides) needs."""
    checks = [
        *(task.checks.initial if initial is None else initial),
        *(task.checks.final if final is None else final),
    ]
    missing_checks = sorted({c.check for c in checks} - set(registered_checks()))
    missing_skills = sorted({s.skill for s in task.program} - set(registered_skills()))
    return [f"check {n!r}" for n in missing_checks] + [f"skill {n!r}" for n in missing_skills]


def unregistered_message(names: Sequence[str]) -> str:
    return (
        f"the task uses {', '.join(names)}, not registered in this process; "
        "import the module that registers them (--plugin MODULE)"
    )
