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

from domain.errors import ConcurrencyError, EventSchemaError, UnknownRun
from domain.events import normalize_payload, validate_payload
from domain.lifecycle import COMPLETED
from domain.state import Folder, RunState
from store.leases import Lease
from store.records import NewEvent, RecordedEvent, RunSummary

log = structlog.get_logger(__name__)

FoldRow = tuple[int, str, str, int]  # seq, type, payload (JSON text), schema_version
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
    """An event validated for appending: its JSON payload and canonical text."""

    __slots__ = ("seq", "type", "payload", "text")

    def __init__(self, seq: int, event_type: str, payload: dict, text: str) -> None:
        self.seq = seq
        self.type = event_type
        self.payload = payload
        self.text = text


class StoreCore:
    """Backend-independent half of an event store."""

    def __init__(self) -> None:
        self._folds: dict[str, Folder] = {}
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
        state: RunState, fence: Lease | None = None,
    ) -> None:
        """Write atomically; with ``fence``, in the same transaction as a check that the
        lease row still carries ``fence``'s token (``LeaseLost`` and nothing written if not)."""
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
        try:
            for seq, event_type, text, schema_version in self._load(
                run_id, folder.state.version
            ):
                apply(
                    seq, event_type,
                    _stored_payload(run_id, seq, event_type, text, schema_version),
                )
        except Exception:
            self._folds.pop(run_id, None)
            raise
        self._folds[run_id] = folder
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
                self._write(run_id, prepared, expected_version, folder.state, fence)
            except BaseException:
                self._folds.pop(run_id, None)
                raise
            self._folds[run_id] = folder
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

