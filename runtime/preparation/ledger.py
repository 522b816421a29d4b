"""The preparation session's writer: every fact is appended before the next step relies on
it, with the expected version so a concurrent writer is refused, and each append doubles as
a chance to renew the run's lease."""

from __future__ import annotations

import time
from typing import Any

from store.records import NewEvent


class Ledger:
    """Appends this session's events with optimistic concurrency and keeps the lease alive."""

    def __init__(self, store: Any, run_id: str, version: int, lease: Any | None) -> None:
        self.store = store
        self.run_id = run_id
        self.version = version
        self.lease = lease
        self._last_beat = time.monotonic()

    def emit(self, event_type: str, payload: dict[str, Any]) -> None:
        self.version = self.store.append(
            self.run_id, [NewEvent(event_type, payload)], expected_version=self.version
        )
        self.heartbeat()

    def heartbeat(self) -> None:
        """Renew the lease, at most every quarter TTL (a renewal is a store write)."""
        if self.lease is None:
            return
        now = time.monotonic()
        if now - self._last_beat >= self.lease.ttl_s / 4:
            self.lease.heartbeat()
            self._last_beat = now

    def release(self) -> None:
        if self.lease is not None:
            self.lease.release()
            self.lease = None
