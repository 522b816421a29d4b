"""The hash chain over a run's events: the exact bytes hashed, and the walk that checks it.

Why a chain: the schema's triggers stop honest mistakes, but anyone who can write the
database file can drop them and rewrite history. With each event's hash covering its
predecessor's, one head hash noted outside the database (a lab book, a paper) pins every
event before it, and every file whose digest an event carries. There is no secret key:
the chain proves integrity against a noted head, not authorship.

The hashed bytes (see docs/INTERFACES.md, "Hash chain"): the ASCII tag
``assetcast-event-v1`` followed by seven netstrings ``<byte length>:<bytes>,`` of, in
order, run id, seq (decimal), type, schema version (decimal), payload (the canonical JSON
text exactly as stored, UTF-8), recorded_at (``YYYY-MM-DDTHH:MM:SS.ffffffZ``, UTC) and the
previous event's hash (64 lowercase hex; ``GENESIS`` for seq 1). The hash is the SHA-256 of
those bytes, lowercase hex. Length prefixes make the encoding unambiguous whatever the
fields contain.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from domain.errors import AssetcastInputError

GENESIS = "0" * 64
"""The previous hash of a run's first event."""

TAG = b"assetcast-event-v1"

ChainRow = tuple[int, str, int, str, datetime, str | None, str | None]
"""seq, type, schema_version, payload text, recorded_at (aware), prev_hash, hash."""


def time_text(value: datetime) -> str:
    """The one text form of ``recorded_at`` that is hashed (microseconds, UTC, ``Z``)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _net(data: bytes) -> bytes:
    return b"%d:%s," % (len(data), data)


def event_bytes(
    run_id: str, seq: int, event_type: str, schema_version: int, payload_text: str,
    recorded_at: str, prev_hash: str,
) -> bytes:
    """The exact bytes an event's hash covers (``recorded_at`` already in ``time_text``)."""
    return TAG + b"".join(
        _net(part) for part in (
            run_id.encode("utf-8"), b"%d" % seq, event_type.encode("utf-8"),
            b"%d" % schema_version, payload_text.encode("utf-8"), recorded_at.encode("ascii"),
            prev_hash.encode("ascii"),
        )
    )


def event_hash(
    run_id: str, seq: int, event_type: str, schema_version: int, payload_text: str,
    recorded_at: str, prev_hash: str,
) -> str:
    return hashlib.sha256(
        event_bytes(run_id, seq, event_type, schema_version, payload_text, recorded_at, prev_hash)
    ).hexdigest()


_SHA = hashlib.sha256


def _fast_hash(
    prefix: bytes, seq: int, event_type: str, version: bytes, text: str, at: bytes,
    prev_hash: str,
) -> str:
    """``event_hash`` with the per-run and per-append netstrings precomputed by the caller
    (``prefix`` = TAG + run id, ``version`` and ``at`` as netstrings): the same bytes, one
    formatting operation, because it runs on every append and every event verified."""
    kind, body, number = event_type.encode("utf-8"), text.encode("utf-8"), b"%d" % seq
    return _SHA(b"%s%d:%s,%d:%s,%s%d:%s,%s%d:%s," % (
        prefix, len(number), number, len(kind), kind, version, len(body), body, at,
        len(prev_hash), prev_hash.encode("ascii"),
    )).hexdigest()


def chain_hashes(
    run_id: str, start_seq: int, prev_hash: str, recorded_at: str, schema_version: int,
    events: Sequence[tuple[str, str]],
) -> list[tuple[str, str]]:
    """``(prev_hash, hash)`` for events ``(type, payload text)`` appended from ``start_seq``
    in one transaction (one ``recorded_at``)."""
    out = []
    prefix = TAG + _net(run_id.encode("utf-8"))
    version = _net(b"%d" % schema_version)
    at = _net(recorded_at.encode("ascii"))
    for offset, (event_type, text) in enumerate(events):
        digest = _fast_hash(prefix, start_seq + offset, event_type, version, text, at, prev_hash)
        out.append((prev_hash, digest))
        prev_hash = digest
    return out


class ChainBroken(AssetcastInputError):
    """A run whose hash chain does not verify may not be continued: appending would bury
    the evidence under a fresh, valid-looking head."""


@dataclass(frozen=True)
class ChainAnchor:
    """A place in a run's chain that was verified when it was recorded: event ``seq`` of
    type ``type`` has hash ``hash`` and every event up to it chained correctly then. A
    cheap check walks only the events after it; ``verify`` still walks them all."""

    seq: int
    hash: str
    type: str


@dataclass
class ChainReport:
    """The result of walking one run's chain: the first problem, if any, names its place."""

    run_id: str
    events: int = 0
    head: str = GENESIS
    """Hash of the last event that verified (the run's head when ``ok``)."""
    stored_head: str | None = None
    problem: str | None = None
    problem_seq: int | None = None
    notes: list[str] = field(default_factory=list)
    anchor_seq: int = 0
    """0 for a full walk; else the walk started after this verified anchor (seq 1..it
    were checked when the anchor was recorded, not now)."""

    @property
    def ok(self) -> bool:
        return self.problem is None

    def summary(self) -> str:
        if self.ok:
            return f"run {self.run_id}: hash chain ok ({self.events} events, head {self.head})"
        return f"run {self.run_id}: hash chain broken: {self.problem}"


def _recorded_as(
    run_id: str, row: ChainRow, at: str, max_seq: int
) -> int | None:
    """The seq this row's stored hash was computed for, if not its current one (a move)."""
    seq, event_type, version, text, _at, prev, stored = row
    if prev is None or stored is None:
        return None
    for candidate in range(1, max_seq + 2):
        if candidate != seq and event_hash(
            run_id, candidate, event_type, version, text, at, prev
        ) == stored:
            return candidate
    return None


def walk_chain(
    run_id: str, rows: Sequence[ChainRow], *, stored_head: str | None,
    stored_version: int | None, noted_head: str | None = None,
    anchor: ChainAnchor | None = None,
) -> ChainReport:
    """Re-hash ``rows`` (ordered by seq) and report the first place the chain breaks.

    Checks, per event in order: no seq is missing, the event's content still gives its
    stored hash (else: moved from another seq, or altered), and it links to the previous
    event's hash (else: the previous event was rewritten or removed). Then the run's
    stored head and version must name the last event (else: the tail was truncated), and
    a noted head must be in the chain.

    With ``anchor`` the walk starts after it: ``rows`` are the events after
    ``anchor.seq`` and the first of them must chain to ``anchor.hash`` (a noted head is
    then only found among the walked events or the anchor).
    """
    report = ChainReport(run_id, stored_head=stored_head)
    prev = GENESIS
    start = 0
    if anchor is not None:
        start, prev = anchor.seq, anchor.hash
        report.events, report.head, report.anchor_seq = start, prev, start
    prefix = TAG + _net(run_id.encode("utf-8"))
    versions: dict[int, bytes] = {}
    seen_times: dict[datetime, bytes] = {}
    max_seq = rows[-1][0] if rows else 0
    hashes: dict[str, int] = {prev: start} if start else {}
    for expected_seq, row in enumerate(rows, start=start + 1):
        seq, event_type, version, text, recorded, row_prev, stored = row
        if seq != expected_seq:
            report.problem_seq = expected_seq
            report.problem = (
                f"seq {expected_seq} is missing (the log goes from seq {expected_seq - 1} "
                f"to seq {seq})"
            )
            return report
        if stored is None or row_prev is None:
            report.problem_seq = seq
            report.problem = f"seq {seq} ({event_type}) has no hash (written outside the store)"
            return report
        at = seen_times.get(recorded)
        if at is None:
            at = seen_times[recorded] = _net(time_text(recorded).encode("ascii"))
        version_net = versions.get(version)
        if version_net is None:
            version_net = versions[version] = _net(b"%d" % version)
        if _fast_hash(prefix, seq, event_type, version_net, text, at, row_prev) != stored:
            report.problem_seq = seq
            moved = _recorded_as(run_id, row, time_text(recorded), max_seq)
            if moved is not None:
                report.problem = (
                    f"events reordered: the event now at seq {seq} ({event_type}) "
                    f"was recorded as seq {moved}"
                )
            else:
                report.problem = (
                    f"seq {seq} ({event_type}) differs from what was recorded: its content "
                    "no longer matches its hash"
                )
            return report
        if row_prev != prev:
            before = rows[seq - start - 2][1] if seq - start >= 2 else (
                anchor.type if anchor is not None else "?"
            )
            report.problem_seq = seq - 1
            report.problem = (
                f"seq {seq - 1} ({before}) was rewritten: seq {seq} chains to a "
                "different hash"
            )
            return report
        prev = stored
        hashes[stored] = seq
        report.events = seq
        report.head = stored
    last = report.events
    if stored_version is not None and stored_version != last:
        report.problem_seq = last + 1
        report.problem = (
            f"the log ends at seq {last} but the run's version is {stored_version}: "
            f"events from seq {last + 1} on are missing (tail truncated)"
            if stored_version > last else
            f"the run's version is {stored_version} but the log holds {last} events"
        )
        return report
    if stored_head != prev:
        report.problem_seq = last + 1
        report.problem = (
            f"the run's head hash is not the hash of its last event seq {last}: "
            "the tail was truncated or the runs row altered"
        )
        return report
    if noted_head is not None:
        noted = noted_head.strip().lower()
        if noted not in hashes:
            report.problem_seq = last + 1
            report.problem = (
                f"the noted head {noted} is not in this run's chain (which ends at seq {last} "
                f"with head {prev}): events were altered, removed or truncated since"
            )
            return report
        if hashes[noted] != last:
            report.notes.append(
                f"the noted head is seq {hashes[noted]}; seq {hashes[noted] + 1}..{last} "
                "were appended after it was noted"
            )
    return report
