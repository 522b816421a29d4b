"""Value objects crossing the store boundary."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Backends without time zones hand back naive UTC; make it explicit."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append; ``seq`` and time are assigned by the store."""

    type: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """An event as stored: ``position`` orders the whole store, ``seq`` one run."""

    position: int
    run_id: str
    seq: int
    type: str
    payload: dict[str, Any]
    recorded_at: datetime
    schema_version: int


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A ``runs`` row: its state and version cache the fold, so listing reads no events."""

    run_id: str
    state: str
    version: int
    created_at: datetime
    updated_at: datetime
    goal: str | None
    task_id: str | None


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    """A lease row as stored: who holds the run, until when, and its fencing ``token``.

    A released lease keeps its row with ``expires_at == heartbeat_at`` (a held one always
    expires after its last heartbeat), so the token survives for the next holder.
    """

    run_id: str
    owner: str
    pid: int
    host: str
    acquired_at: datetime
    heartbeat_at: datetime
    expires_at: datetime
    token: int = 0

    @property
    def released(self) -> bool:
        return self.expires_at <= self.heartbeat_at

    def describe(self) -> str:
        return f"owner {self.owner!r} (pid {self.pid} on host {self.host!r})"

    def held_by(self, owner: str, pid: int, host: str) -> bool:
        """A session is the owner, pid and host together (owners are reused across runs)."""
        return (self.owner, self.pid, self.host) == (owner, pid, host)
