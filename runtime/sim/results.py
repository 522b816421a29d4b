"""Plain result records of the simulator: what checks, skills and programs report.

They are frozen and JSON-friendly (``to_dict``) because the collector writes them
verbatim into ledger events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

CheckStatus = Literal["passed", "failed", "unavailable"]
CHECK_STATUSES: tuple[str, ...] = ("passed", "failed", "unavailable")


def _plain(value: Any) -> Any:
    """Convert numpy scalars/arrays inside metrics to JSON-native values."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: CheckStatus
    detail: str = ""
    metrics: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in CHECK_STATUSES:
            raise ValueError(f"check status must be one of {CHECK_STATUSES}, got {self.status!r}")

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "metrics": _plain(dict(self.metrics)),
        }


def checks_accept(results: Iterable[CheckResult]) -> bool:
    """Fail closed: an empty set, a failure or an unavailable check all reject."""
    items = list(results)
    return bool(items) and all(item.status == "passed" for item in items)


@dataclass(frozen=True)
class SkillResult:
    skill: str
    object: str | None
    completed: bool
    detail: str = ""
    steps: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "skill": self.skill,
            "object": self.object,
            "completed": self.completed,
            "detail": self.detail,
            "steps": self.steps,
        }


@dataclass(frozen=True)
class ProgramResult:
    completed: bool
    skills: tuple[SkillResult, ...]
    steps: int
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "completed": self.completed,
            "skills": [s.to_dict() for s in self.skills],
            "steps": self.steps,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class ReplacementInfo:
    roles_replaced: tuple[str, ...]
    entities_kept: tuple[str, ...]


@dataclass(frozen=True)
class CommitReceipt:
    path: str
    bytes: int
    sha256: str
