"""Snapshots: cached projections of a run at a log position, and when one may be trusted.

Loading a run is "latest valid snapshot + fold of the tail", so the cost of a long history
is paid once per ``snapshot_every`` events instead of on every open. A snapshot is only a
cache: it is trusted only if all of these hold, and otherwise ignored (the log is folded):

* its ``projection_version`` is the one the running code writes (``FOLD_VERSION`` for the
  fold, each projection's own version otherwise), so a changed fold never reads an old body;
* ``body_sha256`` is the SHA-256 of the stored body (a torn or bit-rotted row is caught);
* ``event_digest`` equals the digest of the event the log holds *now* at ``seq`` (a changed
  event beneath the snapshot invalidates it);
* the body decodes (strictly) to a state at exactly ``seq``.

A corrupt snapshot therefore can never change what a run is; at worst it costs a full fold.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from domain.canonical import canonical_json, sha256_hex
from domain.chain import ChainAnchor

log = structlog.get_logger(__name__)

SNAPSHOT_ENV = "ASSETCAST_SNAPSHOT_EVERY"
DEFAULT_SNAPSHOT_EVERY = 10_000
FOLD_KIND = "fold"
CHAIN_KIND = "chain"
"""The verified chain anchor (:class:`domain.chain.ChainAnchor`), kept beside the fold."""
CHAIN_VERSION = 1


def snapshot_interval(value: int | None = None) -> int:
    """Events between snapshots: ``value``, else ``$ASSETCAST_SNAPSHOT_EVERY``, else 10,000
    (0 turns snapshots off)."""
    if value is None:
        raw = os.environ.get(SNAPSHOT_ENV)
        if raw is None or raw.strip() == "":
            return DEFAULT_SNAPSHOT_EVERY
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"${SNAPSHOT_ENV}: not an integer: {raw!r}") from None
    if type(value) is not int or value < 0:
        raise ValueError(f"snapshot interval must be an integer >= 0, got {value!r}")
    return value


def crosses_boundary(before: int, after: int, every: int) -> bool:
    """True when appending seqs ``before+1..after`` passes a multiple of ``every``."""
    return every > 0 and before // every != after // every


def event_digest(
    seq: int, event_type: str, payload_text: str, schema_version: int,
    chain_hash: str | None = None,
) -> str:
    """What a snapshot remembers of the event it was taken at: the stored row itself and,
    when the row carries one, its chain hash, which covers the whole prefix of the log (a
    rewritten earlier event with its hashes recomputed changes it). The row is kept in the
    digest too, so a payload altered beneath an unchanged hash column still invalidates."""
    if chain_hash is None:
        return sha256_hex(f"{seq}\n{event_type}\n{schema_version}\n{payload_text}".encode())
    return sha256_hex(
        f"{seq}\n{event_type}\n{schema_version}\n{chain_hash}\n{payload_text}".encode()
    )


@dataclass(frozen=True, slots=True)
class SnapshotRecord:
    """A snapshot row (to write or as read)."""

    run_id: str
    kind: str
    seq: int
    projection_version: int
    event_digest: str
    body_sha256: str
    body: str


def make_record(
    run_id: str, kind: str, seq: int, version: int, digest: str, body: Any
) -> SnapshotRecord:
    text = canonical_json(body)
    return SnapshotRecord(run_id, kind, seq, version, digest, sha256_hex(text.encode()), text)


def trusted_body(
    record: SnapshotRecord | None,
    *,
    version: int,
    digest_at: Callable[[int], str | None],
) -> Any | None:
    """The decoded JSON body of ``record`` if it may be trusted, else None (logged)."""
    if record is None:
        return None
    reason = None
    if record.projection_version != version:
        reason = f"projection version {record.projection_version}, code writes {version}"
    elif sha256_hex(record.body.encode()) != record.body_sha256:
        reason = "body does not match its SHA-256"
    elif digest_at(record.seq) != record.event_digest:
        reason = f"the event at seq {record.seq} is not the one it was taken over"
    if reason is None:
        try:
            return json.loads(record.body)
        except ValueError as exc:
            reason = f"body is not JSON: {exc}"
    log.warning(
        "snapshot_ignored", run_id=record.run_id, kind=record.kind, seq=record.seq,
        reason=reason,
    )
    return None


def anchor_body(anchor: ChainAnchor) -> dict[str, Any]:
    return {"seq": anchor.seq, "hash": anchor.hash, "type": anchor.type}


def anchor_from(seq: int, body: Any) -> ChainAnchor | None:
    """The anchor a trusted ``chain`` snapshot body names, or None if it is malformed."""
    if not isinstance(body, dict) or set(body) != {"seq", "hash", "type"}:
        return None
    digest, kind = body["hash"], body["type"]
    if body["seq"] != seq or type(seq) is not int or seq < 1:
        return None
    if not isinstance(digest, str) or len(digest) != 64 or not isinstance(kind, str):
        return None
    if digest.strip("0123456789abcdef"):
        return None
    return ChainAnchor(seq, digest, kind)
