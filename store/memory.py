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
from store.base import StoreCore
from store.leases import (
    Lease,
    fenced_by,
    held_message,
    is_live,
    lease_lost,
    new_expiry,
    this_host,
)
from store.records import LeaseInfo, RunSummary, run_counts, utcnow
from store.snapshots import SnapshotRecord, event_digest
from store.stored_rows import FoldRow, PreparedEvent, ReadRow


class InMemoryEventStore(StoreCore):
    """``EventStore``'s contract without its durability: nothing outlives the process."""

    def __init__(self, url: str | None = None, *, snapshot_every: int | None = None) -> None:
        super().__init__(snapshot_every=snapshot_every)
        self._snapshots: dict[tuple[str, str], SnapshotRecord] = {}
        # ReadRow + (prev_hash, hash): the same row shape as the SQL table.
        self._events: dict[str, list[tuple]] = {}
        self._runs: dict[str, dict] = {}
        self._leases: dict[str, LeaseInfo] = {}
        self._position = 0

    def _where(self) -> str:
        return "the in-memory store"

    def close(self) -> None:
        """Nothing to release; present for interface parity."""

    def _read_rows(self, run_id: str, after_seq: int) -> list[ReadRow]:
        with self._lock:
            return [row[:6] for row in self._events.get(run_id, [])[after_seq:]]

    def _load(self, run_id: str, after_seq: int) -> list[FoldRow]:
        with self._lock:
            rows = self._events.get(run_id, [])[after_seq:]
        return [
            (seq, event_type, text, schema_version, digest)
            for _pos, seq, event_type, text, _at, schema_version, _prev, digest in rows
        ]

    def _chain_rows(self, run_id: str, after_seq: int = 0) -> tuple[list, int | None, str | None]:
        with self._lock:
            rows = [
                (seq, event_type, version, text, at, prev, digest)
                for _pos, seq, event_type, text, at, version, prev, digest
                in self._events.get(run_id, [])[after_seq:]
            ]
            run = self._runs.get(run_id)
            if run is None:
                return rows, None, None
            return rows, run["version"], run.get("head_hash")

    def _hash_at(self, run_id: str, seq: int) -> str | None:
        with self._lock:
            rows = self._events.get(run_id, [])
            return rows[seq - 1][7] if 0 < seq <= len(rows) else None

    def _run_head(self, run_id: str) -> str | None:
        run = self._runs.get(run_id)
        return None if run is None else run.get("head_hash")

    def _run_exists(self, run_id: str) -> bool:
        return run_id in self._runs

    def _snapshot(self, run_id: str, kind: str) -> SnapshotRecord | None:
        return self._snapshots.get((run_id, kind))

    def _event_digest(self, run_id: str, seq: int) -> str | None:
        rows = self._events.get(run_id, [])
        if not 1 <= seq <= len(rows):
            return None
        _pos, found_seq, event_type, text, _at, schema_version, *hashes = rows[seq - 1]
        chained = hashes[1] if len(hashes) == 2 else None
        return event_digest(found_seq, event_type, text, schema_version, chained)

    def _put_snapshots(self, records: Sequence[SnapshotRecord]) -> None:
        with self._lock:
            for record in records:
                self._snapshots[(record.run_id, record.kind)] = record

    def _drop_snapshots(self, run_id: str, kinds: Sequence[str]) -> None:
        with self._lock:
            for kind in kinds:
                self._snapshots.pop((run_id, kind), None)

    def _drop_snapshot_prefix(self, run_id: str, prefix: str) -> None:
        with self._lock:
            for key in [k for k in self._snapshots if k[0] == run_id and k[1].startswith(prefix)]:
                del self._snapshots[key]

    def list_runs(self) -> list[RunSummary]:
        with self._lock:
            return [
                RunSummary(
                    r["run_id"], r["state"], r["version"], r["created_at"], r["updated_at"],
                    r["goal"], r["task_id"], **r["counts"],
                )
                for r in sorted(self._runs.values(), key=lambda r: (r["created_at"], r["run_id"]))
            ]

    def _write(
        self, run_id: str, prepared: Sequence[PreparedEvent], expected_version: int,
        state: RunState, now: datetime, fence: Lease | None = None, *,
        snapshots: Sequence[SnapshotRecord] = (),
    ) -> None:
        if fence is not None:  # under self._lock, like the rest of the write
            self._check_lease(fence)
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
            log.append((
                self._position, event.seq, event.type, event.text, now, SCHEMA_VERSION,
                event.prev_hash, event.hash,
            ))
        run.update(
            state=state.state, version=prepared[-1].seq, updated_at=now,
            head_hash=prepared[-1].hash, counts=run_counts(state),
        )
        self._runs[run_id] = run
        self._put_snapshots(snapshots)

    def _inject(self, run_id: str, event_type: str, text: str, schema_version: int) -> None:
        """Test hook: place a raw row in the log, bypassing validation (simulates a log
        written by another tool or a newer version)."""
        with self._lock:
            log = self._events.setdefault(run_id, [])
            self._position += 1
            log.append((
                self._position, len(log) + 1, event_type, text, utcnow(), schema_version,
                None, None,
            ))

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
