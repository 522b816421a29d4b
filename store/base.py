"""What every store shares: reading, the cached fold, append legality; with the projection
snapshots (:mod:`store.snapshotting`) and the hash chain (:mod:`store.chain_audit`) mixed in.

A store keeps one incremental fold per run. Appends are checked against it (so an
illegal event never reaches the log), and it is refreshed from the backend only by
the events it has not seen yet. If an append fails after the fold already absorbed
part of the batch, the cached fold is dropped and rebuilt on the next use.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime

import structlog

from domain.chain import GENESIS, ChainRow
from domain.errors import ConcurrencyError, UnknownRun
from domain.events import normalize_payload, validate_payload
from domain.lifecycle import COMPLETED
from domain.state import Folder, RunState
from store.chain_audit import ChainAudit
from store.leases import Lease
from store.projections.incremental import Projector
from store.records import NewEvent, RecordedEvent, RunSummary, utcnow
from store.snapshots import SnapshotRecord, crosses_boundary, snapshot_interval
from store.snapshotting import ProjectionSnapshots, advance
from store.stored_rows import FoldRow, PreparedEvent, ReadRow, stored_payload

log = structlog.get_logger(__name__)

__all__ = ["FoldRow", "PreparedEvent", "ReadRow", "StoreCore"]


class StoreCore(ProjectionSnapshots, ChainAudit):
    """Backend-independent half of an event store.

    ``snapshot_every`` (default ``$ASSETCAST_SNAPSHOT_EVERY`` or 10,000; 0 = off): an append
    whose events cross a multiple of it also writes, in the same transaction, a snapshot of
    the fold and of every snapshotted projection at its last event.
    """

    def __init__(self, *, snapshot_every: int | None = None) -> None:
        self._folds: dict[str, Folder] = {}
        # Snapshotted projections kept current by this writer once it first snapshots a run,
        # so a later boundary costs no re-read of the tail.
        self._live: dict[str, dict[str, Projector]] = {}
        # Chain hash of the last event each cached fold absorbed: the next append's
        # prev_hash, known without a read (the version check pins the rows it came from).
        self._heads: dict[str, str] = {}
        self._lock = threading.RLock()
        self.snapshot_every = snapshot_interval(snapshot_every)

    # -- backend hooks --------------------------------------------------------------
    def _load(self, run_id: str, after_seq: int) -> Iterable[FoldRow]:
        raise NotImplementedError

    def _read_rows(self, run_id: str, after_seq: int) -> Sequence[ReadRow]:
        raise NotImplementedError

    def _iter_rows(self, run_id: str, after_seq: int) -> Iterator[ReadRow]:
        """Like ``_read_rows`` but streamed in chunks (memory bounded by a chunk)."""
        yield from self._read_rows(run_id, after_seq)

    def _run_exists(self, run_id: str) -> bool:
        raise NotImplementedError

    def _snapshot(self, run_id: str, kind: str) -> SnapshotRecord | None:
        """The stored snapshot of ``kind`` for the run (None if there is none)."""
        return None

    def _event_digest(self, run_id: str, seq: int) -> str | None:
        """:func:`store.snapshots.event_digest` of the event now at ``seq`` (None if absent)."""
        raise NotImplementedError

    def _put_snapshots(self, records: Sequence[SnapshotRecord]) -> None:
        """Store ``records`` (replacing each run's snapshot of the same kind)."""

    def _drop_snapshots(self, run_id: str, kinds: Sequence[str]) -> None:
        """Delete the run's snapshots of ``kinds`` (absent ones are no error)."""

    def _drop_snapshot_prefix(self, run_id: str, prefix: str) -> None:
        """Delete the run's snapshots whose kind starts with ``prefix`` (a chunked
        projection's chunks, before it is rebuilt)."""

    def run_ids(self) -> list[str]:
        return [summary.run_id for summary in self.list_runs()]

    def _write(
        self, run_id: str, prepared: Sequence[PreparedEvent], expected_version: int,
        state: RunState, now: datetime, fence: Lease | None = None, *,
        snapshots: Sequence[SnapshotRecord] = (),
    ) -> None:
        """Write ``prepared`` (hashes set, all recorded at ``now``) and the run's new
        state, version and head hash (``prepared[-1].hash``) in one transaction; with
        ``fence``, in the same transaction as a check that the lease row still carries
        ``fence``'s token (``LeaseLost`` and nothing written if not)."""
        raise NotImplementedError

    def _chain_rows(
        self, run_id: str, after_seq: int = 0
    ) -> tuple[list[ChainRow], int | None, str | None]:
        """The run's events after ``after_seq`` as stored, by seq, and the run row's version
        and head, read from one snapshot (a concurrent append must not look like
        tampering)."""
        raise NotImplementedError

    def _run_head(self, run_id: str) -> str | None:
        raise NotImplementedError

    def list_runs(self) -> list[RunSummary]:
        raise NotImplementedError

    def acquire_lease(self, run_id: str, *, owner: str, ttl_s: float = 30.0) -> Lease:
        raise NotImplementedError

    def _where(self) -> str:
        return "the store"

    def _unknown_run(self, run_id: str) -> UnknownRun:
        return UnknownRun(f"unknown run {run_id!r} in {self._where()}")

    # -- reading ----------------------------------------------------------------------
    def read(self, run_id: str, *, after_seq: int = 0) -> list[RecordedEvent]:
        """Events of ``run_id`` after ``after_seq``, validated (EventSchemaError if not)."""
        rows = self._read_rows(run_id, after_seq)
        if not rows and not self._run_exists(run_id):
            raise self._unknown_run(run_id)
        return [
            RecordedEvent(
                position, run_id, seq, event_type,
                stored_payload(run_id, seq, event_type, text, schema_version),
                recorded_at, schema_version,
            )
            for position, seq, event_type, text, recorded_at, schema_version in rows
        ]

    def iter_events(self, run_id: str, *, after_seq: int = 0) -> Iterator[RecordedEvent]:
        """:meth:`read`, streamed: memory is bounded by one chunk, not by the log."""
        empty = True
        for position, seq, event_type, text, recorded_at, schema_version in self._iter_rows(
            run_id, after_seq
        ):
            empty = False
            yield RecordedEvent(
                position, run_id, seq, event_type,
                stored_payload(run_id, seq, event_type, text, schema_version),
                recorded_at, schema_version,
            )
        if empty and not self._run_exists(run_id):
            raise self._unknown_run(run_id)

    # -- folding ----------------------------------------------------------------------
    def _refresh(self, run_id: str) -> Folder:
        """The cached fold, advanced by whatever the backend holds beyond it (starting
        from the latest trusted snapshot when nothing is cached)."""
        folder = self._folds.get(run_id)
        cached = folder is not None
        if folder is None:
            folder = self._snapshot_folder(run_id) or Folder(run_id)
        apply = folder.apply
        head = (self._heads.get(run_id) if cached else None) if folder.state.version else GENESIS
        try:
            for seq, event_type, text, schema_version, digest in self._load(
                run_id, folder.state.version
            ):
                apply(
                    seq, event_type,
                    stored_payload(run_id, seq, event_type, text, schema_version),
                )
                head = digest
        except Exception:
            self._folds.pop(run_id, None)
            self._heads.pop(run_id, None)
            raise
        self._folds[run_id] = folder
        if head is None:
            # Restored from a snapshot with no tail: the head is the stored hash of the
            # snapshot's event, read on the next append (_previous_hash), never GENESIS.
            self._heads.pop(run_id, None)
        else:
            self._heads[run_id] = head
        return folder

    def state(self, run_id: str) -> RunState:
        """The run's folded state (cached; only new events are read).

        The returned object is the live cached projection: treat it as read-only and
        call ``state`` again after appending.
        """
        with self._lock:
            folder = self._refresh(run_id)
            if folder.state.version == 0:
                self._folds.pop(run_id, None)
                raise self._unknown_run(run_id)
            return folder.state

    # -- appending --------------------------------------------------------------------
    def _prepare(
        self, run_id: str, events: Sequence[NewEvent], expected_version: int
    ) -> list[PreparedEvent]:
        prepared = []
        for offset, event in enumerate(events, start=1):
            seq = expected_version + offset
            payload, text = normalize_payload(event.type, event.payload)
            validate_payload(event.type, payload, run_id=run_id, seq=seq)
            prepared.append(PreparedEvent(seq, event.type, payload, text))
        return prepared

    def append(
        self, run_id: str, events: Sequence[NewEvent], *, expected_version: int,
        fence: Lease | None = None,
    ) -> int:
        """Append ``events`` atomically after ``expected_version``; return the new version.

        ``expected_version=0`` creates the run. A stale version raises ConcurrencyError
        and an illegal event IllegalTransition; either way nothing is written. With
        ``fence`` (the session's lease) the append is refused with ``LeaseLost`` unless that
        lease still holds the run, checked in the same transaction as the write.
        """
        if not events:
            raise ValueError("append needs at least one event")
        if expected_version < 0:
            raise ValueError("expected_version must be >= 0")
        prepared = self._prepare(run_id, events, expected_version)
        with self._lock:
            folder = self._folds.get(run_id) if expected_version else Folder(run_id)
            if folder is None or folder.state.version != expected_version:
                # Only read when the cache cannot already be at the expected version; if
                # it is but the log moved on, the backend's version check refuses.
                folder = self._refresh(run_id)
            current = folder.state.version
            if current != expected_version:
                if current == 0 and not self._run_exists(run_id):
                    raise self._unknown_run(run_id)
                raise ConcurrencyError(
                    f"run {run_id!r}: expected version {expected_version} but the log is at "
                    f"version {current}; another session appended first"
                )
            try:
                for event in prepared:
                    folder.apply(event.seq, event.type, event.payload)
                now = utcnow()
                previous = self._previous_hash(run_id, expected_version)
                self._link(run_id, prepared, previous, now)
                snapshots = (
                    self._snapshot_records(run_id, folder, prepared, now)
                    if crosses_boundary(expected_version, folder.state.version,
                                        self.snapshot_every)
                    else ()
                )
                self._write(
                    run_id, prepared, expected_version, folder.state, now, fence,
                    snapshots=snapshots,
                )
            except BaseException:
                self._folds.pop(run_id, None)
                self._heads.pop(run_id, None)
                self._live.pop(run_id, None)
                raise
            self._folds[run_id] = folder
            self._heads[run_id] = prepared[-1].hash
            if not snapshots:
                live = self._live.get(run_id, {})
                for kind, projector in list(live.items()):
                    if projector.seq == expected_version:
                        try:
                            advance(projector, run_id, prepared, now)
                        except Exception as exc:  # noqa: BLE001 - a cache; the events are in
                            # (e.g. an evicted chunk whose row is gone): rebuilt at the next
                            # boundary from the stored snapshot + tail
                            log.warning("live_projection_dropped", run_id=run_id, kind=kind,
                                        error=str(exc))
                            live.pop(kind)
            return folder.state.version

    def _append_takeover(self, lease: Lease) -> None:
        """Record a takeover in the run's log (if the run exists and can accept it)."""
        previous = lease.taken_over
        if previous is None:
            return
        payload = {
            "previous_owner": previous.owner, "previous_pid": previous.pid,
            "previous_host": previous.host, "owner": lease.owner, "pid": lease.pid,
            "host": lease.host,
        }
        for _attempt in range(5):
            try:
                state = self.state(lease.run_id)
            except UnknownRun:
                return
            if state.state == COMPLETED:
                log.info("lease_takeover_on_completed_run", run_id=lease.run_id)
                return
            try:
                self.append(
                    lease.run_id, [NewEvent("LeaseTakenOver", payload)],
                    expected_version=state.version, fence=lease,
                )
                return
            except ConcurrencyError:
                continue
        raise ConcurrencyError(f"run {lease.run_id!r}: could not record the lease takeover")
