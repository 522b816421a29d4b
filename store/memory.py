"""An event store held in process memory, with the same interface and rules.

For benchmarks and tests that want the store's semantics (legality, concurrency,
leases) without a database. Payloads are still canonicalized and validated so the
two stores cannot drift apart in what they accept.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from datetime import datetime

from domain.errors import ConcurrencyError, LeaseHeld, UnknownRun
from domain.events import SCHEMA_VERSION, validate_payload
from domain.state import RunState
from store.base import PreparedEvent, Row, StoreCore
from store.leases import Lease, LeaseLost, held_message, is_live, new_expiry, this_host
from store.records import LeaseInfo, RecordedEvent, RunSummary, utcnow


class InMemoryEventStore(StoreCore):
    def __init__(self, url: str | None = None) -> None:
        super().__init__()
        self._events: dict[str, list[tuple[int, int, str, str, datetime, int]]] = {}
        self._runs: dict[str, dict] = {}
        self._leases: dict[str, LeaseInfo] = {}
        self._position = 0

    def _where(self) -> str:
        return "the in-memory store"

    def close(self) -> None:
        """Nothing to release; present for interface parity."""

    def _load(self, run_id: str, after_seq: int) -> Iterator[Row]:
        with self._lock:
            rows = self._events.get(run_id, [])[after_seq:]
        for _pos, seq, event_type, text, _at, schema_version in rows:
            yield seq, event_type, json.loads(text), schema_version

    def _run_exists(self, run_id: str) -> bool:
        return run_id in self._runs

    def read(self, run_id: str, *, after_seq: int = 0) -> list[RecordedEvent]:
        with self._lock:
            if run_id not in self._runs:
                raise UnknownRun(f"unknown run {run_id!r} in {self._where()}")
            rows = self._events[run_id][after_seq:]
        out = []
        for position, seq, event_type, text, recorded_at, schema_version in rows:
            payload = json.loads(text)
            validate_payload(
                event_type, payload, schema_version=schema_version, run_id=run_id, seq=seq
            )
            out.append(
                RecordedEvent(
                    position, run_id, seq, event_type, payload, recorded_at, schema_version
                )
            )
        return out

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
        state: RunState,
    ) -> None:
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
        return self._leases.get(run_id)

    def acquire_lease(self, run_id: str, *, owner: str, ttl_s: float = 30.0) -> Lease:
        pid, host = os.getpid(), this_host()
        now = utcnow()
        expires = new_expiry(now, ttl_s)
        with self._lock:
            current = self._leases.get(run_id)
            mine = current is not None and (current.owner, current.pid, current.host) == (
                owner, pid, host
            )
            if current is not None and not mine and is_live(current, now, host):
                raise LeaseHeld(held_message(current))
            self._leases[run_id] = LeaseInfo(run_id, owner, pid, host, now, now, expires)
        lease = Lease(
            self, run_id, owner, pid, host, ttl_s, expires,
            taken_over=None if current is None or mine else current,
        )
        self._append_takeover(lease)
        return lease

    def _renew_lease(self, lease: Lease) -> datetime:
        now = utcnow()
        expires = new_expiry(now, lease.ttl_s)
        with self._lock:
            current = self._leases.get(lease.run_id)
            if current is None or (current.owner, current.pid, current.host) != (
                lease.owner, lease.pid, lease.host
            ):
                who = held_message(current) if current else f"run {lease.run_id!r} has no lease"
                raise LeaseLost(f"lease of {lease.owner!r} was lost: {who}")
            self._leases[lease.run_id] = LeaseInfo(
                current.run_id, current.owner, current.pid, current.host, current.acquired_at,
                now, expires,
            )
        return expires

    def _release_lease(self, lease: Lease) -> None:
        with self._lock:
            current = self._leases.get(lease.run_id)
            if current is not None and (current.owner, current.pid, current.host) == (
                lease.owner, lease.pid, lease.host
            ):
                del self._leases[lease.run_id]
