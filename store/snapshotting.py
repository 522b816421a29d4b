"""Projection snapshots of a store: trusted restore, the snapshots an append writes at a
boundary, and rebuilding them from the log alone.

Mixed into :class:`store.base.StoreCore`; it uses the core's backend hooks (``_snapshot``,
``_event_digest``, ``_put_snapshots``, ``_iter_rows``, ``_chain_rows``...) and keeps the
writer's live projectors in ``self._live``, so a boundary costs no re-read of the tail.
A snapshot is only ever a cache: one that fails a check is logged and ignored, and the
answer is folded from the log instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import structlog

from domain.chain import ChainAnchor, walk_chain
from domain.events import SCHEMA_VERSION
from domain.state import Folder
from domain.state_codec import FOLD_SNAPSHOT_VERSION, SnapshotCorrupt, decode_folder, encode_state
from store.gc_pause import gc_paused
from store.projections.incremental import (
    ChunkedProjector,
    ChunkLoader,
    ChunkMissing,
    Projector,
    snapshotted,
)
from store.records import RecordedEvent
from store.snapshots import (
    CHAIN_KIND,
    CHAIN_VERSION,
    FOLD_KIND,
    SnapshotRecord,
    anchor_body,
    event_digest,
    make_record,
    trusted_body,
)
from store.stored_rows import PreparedEvent, stored_payload

log = structlog.get_logger(__name__)


def advance(
    projector: Projector, run_id: str, prepared: Sequence[PreparedEvent], now: datetime
) -> None:
    """Apply appended events to a projector (``recorded_at`` is the append's own time)."""
    for event in prepared:
        if event.seq > projector.seq:
            projector.apply(
                RecordedEvent(0, run_id, event.seq, event.type, event.payload, now, SCHEMA_VERSION)
            )


class ProjectionSnapshots:
    """The snapshot half of :class:`~store.base.StoreCore` (see the module docstring)."""

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
                advance(projector, run_id, prepared, now)
            except ChunkMissing as exc:  # an evicted chunk whose row is gone: start over
                log.warning("snapshot_ignored", run_id=run_id, kind=kind, reason=str(exc))
                live.pop(kind, None)
                projector = self.fold_projection(run_id, kind)
                advance(projector, run_id, prepared, now)
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
                payload = stored_payload(run_id, seq, event_type, text, schema_version)
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
