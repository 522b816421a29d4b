"""An event store held in process memory, with the same interface and rules.

For benchmarks and tests that want the store's semantics (legality, concurrency,
leases) without a database. Payloads are still canonicalized and validated so the
two stores cannot drift apart in what they accept.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from domain.errors import ConcurrencyError, LeaseHeld
from domain.events import SCHEMA_VERSION
from domain.state import RunState
from store.base import FoldRow, PreparedEvent, ReadRow, StoreCore
from store.leases import (
    Lease,
    fenced_by,
    held_message,
    is_live,
    lease_lost,
    new_expiry,
    this_host,
)
from store.records import LeaseInfo, RunSummary, utcnow


class InMemoryEventStore(StoreCore):
    """``EventStore``'s contract without its durability: nothing outlives the process."""

    def __init__(self, url: str | None = None) -> None:
        super().__init__()
        self._events: dict[str, list[ReadRow]] = {}
        self._runs: dict[str, dict] = {}
        self._leases: dict[str, LeaseInfo] = {}
        self._position = 0

    def _where(self) -> str:
        return "the in-memory store"

    def close(self) -> None:
        """Nothing to release; present for interface parity."""

    def _read_rows(self, run_id: str, after_seq: int) -> list[ReadRow]:
        with self._lock:
            return self._events.get(run_id, [])[after_seq:]

    def _load(self, run_id: str, after_seq: int) -> list[FoldRow]:
        return [
            (seq, event_type, text, schema_version)
            for _pos, seq, event_type, text, _at, schema_version in self._read_rows(
                run_id, after_seq
            )
        ]

    def _run_exists(self, run_id: str) -> bool:
        return run_id in self._runs

    def list_runs(self) -> list[RunSummary]:
        with self._lock:
            return [
                RunSummary(
                    r["run_id"], r["state"], r["version"], r["created_at"], r["updated_at"],
                    r["goal"], r["task_id"],
                )
                for r in sorted(self._runs.values(), key=lambda r: (r["created_at"], r["run_id"]))
            ]

    def _write(
        self, run_id: str, prepared: Sequence[PreparedEvent], expected_version: int,
        state: RunState, fence: Lease | None = None,
    ) -> None:
        if fence is not None:  # under self._lock, like the rest of the write
            self._check_lease(fence)
        now = utcnow()
        run = self._runs.get(run_id)
        if expected_version == 0:
            if run is not None:
                raise ConcurrencyError(
                    f"run {run_id!r} already exists; expected version 0 is stale"
                )
            created = state.created or {}
            run = {
                "run_id": run_id, "created_at": now, "goal": created.get("goal"),
                "task_id": created.get("task_id"), "version": 0,
            }
        elif run is None or run["version"] != expected_version:
            raise ConcurrencyError(
                f"run {run_id!r}: expected version {expected_version} is stale; "
                "another session appended first"
            )
        log = self._events.setdefault(run_id, [])
        for event in prepared:
            self._position += 1
            log.append(
                (self._position, event.seq, event.type, event.text, now, SCHEMA_VERSION)
            )
        run.update(state=state.state, version=prepared[-1].seq, updated_at=now)
        self._runs[run_id] = run

    def _inject(self, run_id: str, event_type: str, text: str, schema_version: int) -> None:
        """Test hook: place a raw row in the log, bypassing validation (simulates a log
        written by another tool or a newer version)."""
        with self._lock:
            log = self._events.setdefault(run_id, [])
            self._position += 1
            log.append((self._position, len(log) + 1, event_type, text, utcnow(), schema_version))

    # -- leases -----------------------------------------------------------------------
    def lease_info(self, run_id: str) -> LeaseInfo | None:
        """The run's current holder, or None if nobody holds it (never held, or released)."""
        current = self._leases.get(run_id)
        return None if current is None or current.released else current

    def acquire_lease(self, run_id: str, *, owner: str, ttl_s: float = 30.0) -> Lease:
        pid, host = os.getpid(), this_host()
        now = utcnow()
        expires = new_expiry(now, ttl_s)
        with self._lock:
            current = self._leases.get(run_id)
            mine = current is not None and current.held_by(owner, pid, host)
            foreign = current is not None and not mine and not current.released
            if foreign and is_live(current, now, host):
                raise LeaseHeld(held_message(current))
            token = 1 if current is None else current.token + 1
            self._leases[run_id] = LeaseInfo(run_id, owner, pid, host, now, now, expires, token)
        lease = Lease(
            self, run_id, owner, pid, host, ttl_s, expires,
            taken_over=current if foreign else None, token=token,
        )
        self._append_takeover(lease)
        return lease

    def _check_lease(self, lease: Lease) -> None:
        with self._lock:
            current = self._leases.get(lease.run_id)
            if not fenced_by(lease, current):
                raise lease_lost(lease, current)

    def _renew_lease(self, lease: Lease) -> datetime:
        now = utcnow()
        expires = new_expiry(now, lease.ttl_s)
        with self._lock:
            self._check_lease(lease)
            current = self._leases[lease.run_id]
            self._leases[lease.run_id] = replace(current, heartbeat_at=now, expires_at=expires)
        return expires

    def _release_lease(self, lease: Lease) -> None:
        now = utcnow()
        with self._lock:
            current = self._leases.get(lease.run_id)
            if fenced_by(lease, current):
                assert current is not None
                self._leases[lease.run_id] = replace(current, heartbeat_at=now, expires_at=now)
