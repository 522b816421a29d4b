"""The preparation session's writer: every fact is appended before the next step relies on
it, with the expected version so a concurrent writer is refused, and fenced by the session's
lease so a session that was taken over appends nothing. The lease itself is renewed by the
session's heartbeat thread, however long a step takes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store.records import NewEvent


class Ledger:
    """Appends this session's events with optimistic concurrency, fenced by its lease."""

    def __init__(self, store: Any, run_id: str, version: int, session: Any | None) -> None:
        self.store = store
        self.run_id = run_id
        self.version = version
        self.session = session

    @property
    def fence(self) -> Any | None:
        """The session guarding this run's files (None once released)."""
        return self.session

    def emit(self, event_type: str, payload: dict[str, Any]) -> None:
        self.emit_all([(event_type, payload)])

    def emit_all(self, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Append ``events`` in order as one transaction (one durable commit for a whole
        chunk of candidates, not one per candidate); nothing when there are none."""
        if not events:
            return
        lease = None if self.session is None else self.session.lease
        self.version = self.store.append(
            self.run_id, [NewEvent(t, p) for t, p in events], expected_version=self.version,
            fence=lease,
        )

    def release(self) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            session.close()
