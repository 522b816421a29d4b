"""Which names a task uses that no registered check or skill answers to.

Asked before a run starts: an unknown check would be judged `unavailable` and reject every
episode, and a resumed run without the user's module would silently change the verdicts
of the session it continues.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from domain.task import CheckSpec, TaskSpec
from runtime.sim.checks import registered_checks
from runtime.sim.skills import registered_skills


def _named(kind: str, name: str, known: Iterable[str]) -> str:
    """``skill 'pik' (did you mean 'pick'?)``: a typo is the usual cause, so name the fix."""
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{kind} {name!r}{hint}"


def unregistered_names(
    task: TaskSpec,
    initial: Sequence[CheckSpec] | None = None,
    final: Sequence[CheckSpec] | None = None,
) -> list[str]:
    """``["check 'x'", "skill 'y'"]`` for every name the task (or the overrides) needs,
    each with the closest registered name when one is close."""
    checks = [
        *(task.checks.initial if initial is None else initial),
        *(task.checks.final if final is None else final),
    ]
    known_checks, known_skills = registered_checks(), registered_skills()
    missing_checks = sorted({c.check for c in checks} - set(known_checks))
    missing_skills = sorted({s.skill for s in task.program} - set(known_skills))
    return [_named("check", n, known_checks) for n in missing_checks] + [
        _named("skill", n, known_skills) for n in missing_skills
    ]


def unregistered_message(names: Sequence[str]) -> str:
    return (
        f"the task uses {', '.join(names)}, not registered in this process; "
        "import the module that registers them (--plugin MODULE)"
    )
