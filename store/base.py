"""What every store shares: decoding and validating stored payloads, the cached fold,
append legality.

A store keeps one incremental fold per run. Appends are checked against it (so an
illegal event never reaches the log), and it is refreshed from the backend only by
the events it has not seen yet. If an append fails after the fold already absorbed
part of the batch, the cached fold is dropped and rebuilt on the next use.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime

import structlog

from domain.chain import (
    GENESIS,
    ChainBroken,
    ChainReport,
    ChainRow,
    chain_hashes,
    time_text,
    walk_chain,
)
from domain.errors import ConcurrencyError, EventSchemaError, UnknownRun
from domain.events import SCHEMA_VERSION, normalize_payload, validate_payload
from domain.lifecycle import COMPLETED
from domain.state import Folder, RunState
from store.leases import Lease
from store.records import NewEvent, RecordedEvent, RunSummary, utcnow

log = structlog.get_logger(__name__)

FoldRow = tuple[int, str, str, int, str | None]  # seq, type, payload text, schema_version, hash
# position, seq, type, payload (JSON text), recorded_at (aware UTC), schema_version
ReadRow = tuple[int, int, str, str, datetime, int]


def _stored_payload(
    run_id: str, seq: int, event_type: str, text: str, schema_version: int
) -> dict:
    """Parse and validate one stored payload: a log written by other means is refused,
    never misread, whether it is folded or read."""
    try:
        try:
            payload = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise EventSchemaError(
                f"run {run_id!r} seq {seq} {event_type}: payload is not valid JSON: {exc}"
            ) from exc
        validate_payload(
            event_type, payload, schema_version=schema_version, run_id=run_id, seq=seq
        )
    except EventSchemaError as error:
        error.run_id, error.seq = run_id, seq
        raise
    return payload


class PreparedEvent:
    """An event validated for appending: its JSON payload, canonical text and, once the
    append has chosen its time, its place in the hash chain."""

    __slots__ = ("seq", "type", "payload", "text", "prev_hash", "hash")

    def __init__(self, seq: int, event_type: str, payload: dict, text: str) -> None:
        self.seq = seq
        self.type = event_type
        self.payload = payload
        self.text = text
        self.prev_hash = GENESIS
        self.hash = GENESIS


class StoreCore:
    """Backend-independent half of an event store."""

    def __init__(self) -> None:
        self._folds: dict[str, Folder] = {}
        # Chain hash of the last event each cached fold absorbed: the next append's
        # prev_hash, known without a read (the version check pins the rows it came from).
        self._heads: dict[str, str] = {}
        self._lock = threading.RLock()

    # -- backend hooks --------------------------------------------------------------
    def _load(self, run_id: str, after_seq: int) -> Iterable[FoldRow]:
        raise NotImplementedError

    def _read_rows(self, run_id: str, after_seq: int) -> Sequence[ReadRow]:
        raise NotImplementedError

    def _run_exists(self, run_id: str) -> bool:
        raise NotImplementedError

    def _write(
        self, run_id: str, prepared: Sequence[PreparedEvent], expected_version: int,
        state: RunState, now: datetime, fence: Lease | None = None,
    ) -> None:
        """Write ``prepared`` (hashes set, all recorded at ``now``) and the run's new
        state, version and head hash (``prepared[-1].hash``) in one transaction; with
        ``fence``, in the same transaction as a check that the lease row still carries
        ``fence``'s token (``LeaseLost`` and nothing written if not)."""
        raise NotImplementedError

    def _chain_rows(self, run_id: str) -> tuple[list[ChainRow], int | None, str | None]:
        """Every event of the run as stored, by seq, and the run row's version and head,
        read from one snapshot (a concurrent append must not look like tampering)."""
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
                _stored_payload(run_id, seq, event_type, text, schema_version),
                recorded_at, schema_version,
            )
            for position, seq, event_type, text, recorded_at, schema_version in rows
        ]

    # -- folding ----------------------------------------------------------------------
    def _refresh(self, run_id: str) -> Folder:
        """The cached fold, advanced by whatever the backend holds beyond it."""
        folder = self._folds.get(run_id)
        if folder is None:
            folder = Folder(run_id)
        apply = folder.apply
        head = self._heads.get(run_id) if folder.state.version else GENESIS
        try:
            for seq, event_type, text, schema_version, digest in self._load(
                run_id, folder.state.version
            ):
                apply(
                    seq, event_type,
                    _stored_payload(run_id, seq, event_type, text, schema_version),
                )
                head = digest
        except Exception:
            self._folds.pop(run_id, None)
            self._heads.pop(run_id, None)
            raise
        self._folds[run_id] = folder
        self._heads[run_id] = head or GENESIS
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
                self._write(run_id, prepared, expected_version, folder.state, now, fence)
            except BaseException:
                self._folds.pop(run_id, None)
                self._heads.pop(run_id, None)
                raise
            self._folds[run_id] = folder
            self._heads[run_id] = prepared[-1].hash
            return folder.state.version

    # -- the hash chain ---------------------------------------------------------------
    def _previous_hash(self, run_id: str, expected_version: int) -> str:
        """The hash the next event chains to: the cached head, else (a fold restored by
        other means) the stored hash of the event at ``expected_version``."""
        if expected_version == 0:
            return GENESIS
        head = self._heads.get(run_id)
        if head is None:
            head = self._hash_at(run_id, expected_version) or GENESIS
        return head

    def _hash_at(self, run_id: str, seq: int) -> str | None:
        raise NotImplementedError

    def _link(
        self, run_id: str, prepared: Sequence[PreparedEvent], previous: str, now: datetime
    ) -> None:
        """Set each event's ``prev_hash`` and ``hash`` (one hook, so the benchmark can
        measure appends without it)."""
        links = chain_hashes(
            run_id, prepared[0].seq, previous, time_text(now), SCHEMA_VERSION,
            [(e.type, e.text) for e in prepared],
        )
        for event, (prev_hash, digest) in zip(prepared, links, strict=True):
            event.prev_hash, event.hash = prev_hash, digest

    def verify_chain(self, run_id: str, *, noted_head: str | None = None) -> ChainReport:
        """Re-walk the run's hash chain from the stored rows (never from the cache).

        Nothing is repaired: the report names the first place that differs.
        """
        rows, version, head = self._chain_rows(run_id)
        if not rows and version is None:
            raise self._unknown_run(run_id)
        return walk_chain(
            run_id, rows, stored_head=head, stored_version=version, noted_head=noted_head
        )

    def require_intact_chain(self, run_id: str) -> ChainReport:
        """The chain report, or ChainBroken (bad input: nothing is appended) if it fails."""
        report = self.verify_chain(run_id)
        if not report.ok:
            raise ChainBroken(
                f"run {run_id}: hash chain broken: {report.problem}; refusing to continue "
                "a run whose log was altered (see `assetcast verify`)"
            )
        return report

    def head_hash(self, run_id: str) -> str | None:
        """The run's head hash as stored in its run row (unverified; see verify_chain)."""
        return self._run_head(run_id)

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

