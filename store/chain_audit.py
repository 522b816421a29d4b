"""The hash chain of a store: linking appended events, and checking a run's stored chain
(the whole walk of ``verify``, and the cheap check from the verified anchor that every
reading command and resume makes).

Mixed into :class:`store.base.StoreCore`; it reads only what the backend stores
(``_chain_rows``, ``_hash_at``, ``_run_head``), never the writer's cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

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
from domain.errors import EventSchemaError
from domain.events import SCHEMA_VERSION
from store.snapshots import CHAIN_KIND, CHAIN_VERSION, anchor_from
from store.stored_rows import PreparedEvent, stored_payload

log = structlog.get_logger(__name__)


class ChainAudit:
    """The hash-chain half of :class:`~store.base.StoreCore` (see the module docstring)."""

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
                stored_payload(run_id, seq, event_type, text, schema_version)
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
