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
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import structlog

from domain.chain import (
    GENESIS,
    ChainAnchor,
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
from domain.state_codec import (
    FOLD_SNAPSHOT_VERSION,
    SnapshotCorrupt,
    decode_folder,
    encode_state,
)
from store.gc_pause import gc_paused
from store.leases import Lease
from store.projections.incremental import (
    ChunkedProjector,
    ChunkLoader,
    ChunkMissing,
    Projector,
    snapshotted,
)
from store.records import NewEvent, RecordedEvent, RunSummary, utcnow
from store.snapshots import (
    CHAIN_KIND,
    CHAIN_VERSION,
    FOLD_KIND,
    SnapshotRecord,
    anchor_body,
    anchor_from,
    crosses_boundary,
    event_digest,
    make_record,
    snapshot_interval,
    trusted_body,
)

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


def _advance(
    projector: Projector, run_id: str, prepared: Sequence[PreparedEvent], now: datetime
) -> None:
    """Apply appended events to a projector (``recorded_at`` is the append's own time)."""
    for event in prepared:
        if event.seq > projector.seq:
            projector.apply(
                RecordedEvent(0, run_id, event.seq, event.type, event.payload, now, SCHEMA_VERSION)
            )


class StoreCore:
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
                _stored_payload(run_id, seq, event_type, text, schema_version),
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
                _stored_payload(run_id, seq, event_type, text, schema_version),
                recorded_at, schema_version,
            )
        if empty and not self._run_exists(run_id):
            raise self._unknown_run(run_id)

    # -- snapshots --------------------------------------------------------------------
    def _trusted(self, run_id: str, kind: str, version: int) -> tuple[int, Any] | None:
        """(seq, body) of the run's snapshot of ``kind`` if it may be trusted."""
        record = self._snapshot(run_id, kind)
        body = trusted_body(
            record, version=version, digest_at=lambda seq: self._event_digest(run_id, seq)
        )
        if body is None or record is None:
            return None
        return record.seq, body

    def _snapshot_folder(self, run_id: str) -> Folder | None:
        found = self._trusted(run_id, FOLD_KIND, FOLD_SNAPSHOT_VERSION)
        if found is None:
            return None
        seq, body = found
        try:
            folder = decode_folder(run_id, body)
            if folder.state.version != seq:
                raise SnapshotCorrupt(f"body is at version {folder.state.version}, row at {seq}")
        except SnapshotCorrupt as exc:
            log.warning("snapshot_ignored", run_id=run_id, kind=FOLD_KIND, reason=str(exc))
            return None
        return folder

    def project(self, run_id: str, kind: str, *, lazy: bool = False) -> Projector:
        """The snapshotted projection ``kind`` of the run, current to the end of its log:
        latest trusted snapshot + the tail, or the whole log streamed when there is none
        (the cyclic GC paused: the states are acyclic and may be huge, ``store.gc_pause``).

        A chunked projection (``ChunkedProjector``) is returned with every chunk resident,
        or with ``lazy`` with only the chunks the tail touched: its answer then loads the
        others as it is walked, and may raise ``ChunkMissing`` (call again without the
        snapshot: :meth:`fold_projection`)."""
        with gc_paused():
            try:
                projector = self._projector_at_snapshot(run_id, kind)
                for event in self.iter_events(run_id, after_seq=projector.seq):
                    projector.apply(event)
                if isinstance(projector, ChunkedProjector) and not lazy:
                    projector.load_all()
            except ChunkMissing as exc:
                log.warning("snapshot_ignored", run_id=run_id, kind=kind, reason=str(exc))
                projector = self.fold_projection(run_id, kind)
        if projector.seq == 0:
            raise self._unknown_run(run_id)
        return projector

    def fold_projection(self, run_id: str, kind: str) -> Projector:
        """The projection ``kind`` folded from the whole log, ignoring every snapshot."""
        projector = self._fresh(run_id, kind)
        with gc_paused():
            for event in self.iter_events(run_id):
                projector.apply(event)
        if projector.seq == 0:
            raise self._unknown_run(run_id)
        return projector

    def _chunk_loader(self, run_id: str, kind: str, version: int) -> ChunkLoader:
        """Loads a chunk of the run's ``kind`` snapshot: only the row its head names (same
        seq and body digest) that passes the snapshot checks itself."""
        digests: dict[int, str | None] = {}

        def digest_at(seq: int) -> str | None:
            if seq not in digests:
                digests[seq] = self._event_digest(run_id, seq)
            return digests[seq]

        def load(name: str, seq: int, sha256: str) -> Any:
            record = self._snapshot(run_id, f"{kind}/{name}")
            if record is None or record.seq != seq or record.body_sha256 != sha256:
                raise ChunkMissing(f"{kind} chunk {name} is not the one its head names")
            body = trusted_body(record, version=version, digest_at=digest_at)
            if body is None:
                raise ChunkMissing(f"{kind} chunk {name} is not trusted")
            return body

        return load

    def _projector_at_snapshot(self, run_id: str, kind: str) -> Projector:
        cls = snapshotted()[kind]
        projector = cls()
        found = self._trusted(run_id, kind, cls.VERSION)
        if found is not None:
            seq, body = found
            try:
                projector = cls.restore(body)
                if projector.seq != seq:
                    raise ValueError(f"body is at seq {projector.seq}, row at {seq}")
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                log.warning("snapshot_ignored", run_id=run_id, kind=kind, reason=str(exc))
                projector = cls()
        if isinstance(projector, ChunkedProjector):
            projector.loader = self._chunk_loader(run_id, kind, cls.VERSION)
        return projector

    def _fresh(self, run_id: str, kind: str) -> Projector:
        projector = snapshotted()[kind]()
        if isinstance(projector, ChunkedProjector):
            projector.loader = self._chunk_loader(run_id, kind, projector.VERSION)
        return projector

    def _projection_records(
        self, run_id: str, kind: str, projector: Projector, digest: str
    ) -> list[SnapshotRecord]:
        """The rows of ``projector``'s snapshot at its seq: for a chunked one, the chunks
        changed since its last snapshot, then the head naming every chunk (the clean chunks
        are evicted from memory: they are stored)."""
        version = snapshotted()[kind].VERSION
        records = []
        with gc_paused():
            if isinstance(projector, ChunkedProjector):
                for name, body in projector.dirty_chunks():
                    record = make_record(
                        run_id, f"{kind}/{name}", projector.seq, version, digest, body
                    )
                    projector.chunk_stored(name, record.seq, record.body_sha256)
                    records.append(record)
                projector.evict()
            records.append(
                make_record(run_id, kind, projector.seq, version, digest, projector.dump())
            )
        return records

    def _live_projector(self, run_id: str, kind: str, before: int) -> Projector:
        """The run's projection ``kind`` at seq ``before``: the writer's live one when it is
        there, else the stored snapshot + the events up to ``before``."""
        projector = self._live.get(run_id, {}).get(kind)
        if projector is not None and projector.seq == before:
            return projector
        try:
            projector = (
                self._projector_at_snapshot(run_id, kind) if before else self._fresh(run_id, kind)
            )
            if projector.seq < before:
                for event in self.iter_events(run_id, after_seq=projector.seq):
                    if event.seq > before:
                        break
                    projector.apply(event)
        except ChunkMissing as exc:
            log.warning("snapshot_ignored", run_id=run_id, kind=kind, reason=str(exc))
            projector = self._fresh(run_id, kind)
            for event in self.iter_events(run_id):
                if event.seq > before:
                    break
                projector.apply(event)
        return projector

    def _snapshot_records(
        self, run_id: str, folder: Folder, prepared: Sequence[PreparedEvent], now: datetime
    ) -> list[SnapshotRecord]:
        """Snapshots at the last of ``prepared`` (the fold's state already includes them)."""
        last = prepared[-1]
        digest = event_digest(last.seq, last.type, last.text, SCHEMA_VERSION, last.hash)
        records = [
            make_record(
                run_id, FOLD_KIND, last.seq, FOLD_SNAPSHOT_VERSION, digest,
                encode_state(folder.state),
            )
        ]
        before = prepared[0].seq - 1
        if self._segment_verifies(run_id, before, prepared[0].prev_hash):
            anchor = ChainAnchor(last.seq, last.hash, last.type)
            records.append(
                make_record(run_id, CHAIN_KIND, last.seq, CHAIN_VERSION, digest,
                            anchor_body(anchor))
            )
        live = self._live.setdefault(run_id, {})
        for kind in snapshotted():
            projector = self._live_projector(run_id, kind, before)
            try:
                _advance(projector, run_id, prepared, now)
            except ChunkMissing as exc:  # an evicted chunk whose row is gone: start over
                log.warning("snapshot_ignored", run_id=run_id, kind=kind, reason=str(exc))
                live.pop(kind, None)
                projector = self.fold_projection(run_id, kind)
                _advance(projector, run_id, prepared, now)
            live[kind] = projector  # ahead of the log until the write commits (dropped if not)
            records += self._projection_records(run_id, kind, projector, digest)
        return records

    def _segment_verifies(self, run_id: str, before: int, previous: str) -> bool:
        """Whether the stored events between the run's chain anchor and seq ``before``
        chain from the anchor to ``previous`` (the hash this append links to). Walked once
        per snapshot interval, so the next anchor is one whose whole prefix verified; a
        failure only means no new anchor (cheap checks keep walking from the old one)."""
        try:
            anchor = self.chain_anchor(run_id)
            if anchor is not None and anchor.seq > before:
                anchor = None
            rows, _version, _head = self._chain_rows(
                run_id, anchor.seq if anchor is not None else 0
            )
            rows = [row for row in rows if row[0] <= before]
            report = walk_chain(
                run_id, rows, stored_head=previous, stored_version=before, anchor=anchor
            )
        except Exception as exc:  # noqa: BLE001 - an anchor is a cache; the append goes on
            log.warning("chain_anchor_not_advanced", run_id=run_id, error=str(exc))
            return False
        if not report.ok:
            log.warning("chain_anchor_not_advanced", run_id=run_id, problem=report.problem)
        return report.ok

    def rebuild_snapshots(self, run_ids: Sequence[str] | None = None) -> list[SnapshotRecord]:
        """Recompute every snapshot from the logs alone (ignoring the stored ones) and store
        them; returns what was written."""
        written = []
        for run_id in run_ids if run_ids is not None else self.run_ids():
            folder = Folder(run_id)
            projectors = {kind: cls() for kind, cls in snapshotted().items()}
            last = None
            for row in self._iter_rows(run_id, 0):
                _position, seq, event_type, text, recorded_at, schema_version = row
                payload = _stored_payload(run_id, seq, event_type, text, schema_version)
                folder.apply(seq, event_type, payload)
                event = RecordedEvent(
                    row[0], run_id, seq, event_type, payload, recorded_at, schema_version
                )
                for projector in projectors.values():
                    projector.apply(event)
                last = (seq, event_type, text, schema_version)
            if last is None:
                continue
            digest = self._event_digest(run_id, last[0]) or event_digest(*last)
            records = [
                make_record(
                    run_id, FOLD_KIND, last[0], FOLD_SNAPSHOT_VERSION, digest,
                    encode_state(folder.state),
                )
            ]
            for kind, projector in projectors.items():
                records += self._projection_records(run_id, kind, projector, digest)
                if isinstance(projector, ChunkedProjector):
                    self._drop_snapshot_prefix(run_id, f"{kind}/")
            chain = self.verify_chain(run_id)
            if chain.ok and chain.events == last[0]:
                anchor = ChainAnchor(last[0], chain.head, last[1])
                records.append(
                    make_record(run_id, CHAIN_KIND, last[0], CHAIN_VERSION, digest,
                                anchor_body(anchor))
                )
            else:
                log.warning("chain_anchor_dropped", run_id=run_id, problem=chain.problem)
                self._drop_snapshots(run_id, (CHAIN_KIND,))
            self._put_snapshots(records)
            written += records
            with self._lock:
                self._folds.pop(run_id, None)
                self._heads.pop(run_id, None)
                self._live.pop(run_id, None)
        return written

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
                    _stored_payload(run_id, seq, event_type, text, schema_version),
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
                            _advance(projector, run_id, prepared, now)
                        except Exception as exc:  # noqa: BLE001 - a cache; the events are in
                            # (e.g. an evicted chunk whose row is gone): rebuilt at the next
                            # boundary from the stored snapshot + tail
                            log.warning("live_projection_dropped", run_id=run_id, kind=kind,
                                        error=str(exc))
                            live.pop(kind)
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

    def chain_anchor(self, run_id: str) -> ChainAnchor | None:
        """The run's verified chain anchor, if a trusted one is stored: its snapshot row
        passes the snapshot checks (version, body digest, the event now at its seq is the
        one it was taken over) and that event's stored hash is the anchor's."""
        found = self._trusted(run_id, CHAIN_KIND, CHAIN_VERSION)
        if found is None:
            return None
        anchor = anchor_from(*found)
        if anchor is None or self._hash_at(run_id, anchor.seq) != anchor.hash:
            log.warning("snapshot_ignored", run_id=run_id, kind=CHAIN_KIND,
                        reason="not an anchor of this chain")
            return None
        return anchor

    def _tail_rows(self, run_id: str) -> tuple[ChainReport, list[ChainRow]]:
        anchor = self.chain_anchor(run_id)
        rows, version, head = self._chain_rows(run_id, anchor.seq if anchor else 0)
        if not rows and version is None:
            raise self._unknown_run(run_id)
        report = walk_chain(
            run_id, rows, stored_head=head, stored_version=version, anchor=anchor
        )
        return report, rows

    def check_chain(self, run_id: str) -> ChainReport:
        """The cheap chain check every reading command and every resume makes: only the
        events after the run's verified anchor are re-hashed (O(snapshot interval), not
        O(history)).

        What it guarantees: the anchor event still carries the hash it had when the
        anchor was recorded (so nothing before it was rewritten *with its hashes
        recomputed* without also rewriting the anchor), every later event still hashes to
        its stored hash and links to its predecessor, and the run row's version and head
        name the last event. What only :meth:`verify_chain` (``assetcast verify``) finds:
        an event before the anchor altered without recomputing hashes after the anchor
        was recorded. Without an anchor this is the full walk."""
        return self._tail_rows(run_id)[0]

    def check_tail(self, run_id: str) -> tuple[ChainReport, EventSchemaError | None]:
        """:meth:`check_chain`, and the first event after the anchor whose stored payload
        does not decode (None if all do): what ``runs`` says about a run without folding
        it."""
        report, rows = self._tail_rows(run_id)
        for seq, event_type, schema_version, text, _at, _prev, _hash in rows:
            try:
                _stored_payload(run_id, seq, event_type, text, schema_version)
            except EventSchemaError as error:
                return report, error
        return report, None

    def require_intact_chain(self, run_id: str) -> ChainReport:
        """The cheap chain report (:meth:`check_chain`), or ChainBroken (bad input: nothing
        is appended) if it fails."""
        report = self.check_chain(run_id)
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

