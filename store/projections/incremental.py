"""Projections that can be snapshotted: applied one event at a time, dumped to JSON values and
restored from them, so a report on a long run costs its tail, not its history.

A projector's state must stay bounded by the size of its answer (per batch, per session,
per unfinished episode), never by the number of events. ``VERSION`` is bumped whenever
``apply`` or the dumped shape changes; stored snapshots of another version are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Protocol


class EventLike(Protocol):
    seq: int
    type: str
    payload: Any
    recorded_at: Any


class Projector:
    """Base: tracks the seq it is current to; subclasses hold the rest."""

    KIND: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1

    def __init__(self) -> None:
        self.seq = 0

    def apply(self, event: EventLike) -> None:
        self._apply(event)
        self.seq = event.seq

    def _apply(self, event: EventLike) -> None:
        raise NotImplementedError

    def dump(self) -> dict[str, Any]:
        return {"seq": self.seq, "state": self._dump()}

    def _dump(self) -> Any:
        raise NotImplementedError

    @classmethod
    def restore(cls, body: Any) -> Projector:
        if not isinstance(body, dict) or set(body) != {"seq", "state"}:
            raise ValueError(f"{cls.KIND} snapshot has unexpected fields")
        projector = cls()
        projector._restore(body["state"])
        seq = body["seq"]
        if type(seq) is not int or seq < 0:
            raise ValueError(f"{cls.KIND} snapshot has a bad seq {seq!r}")
        projector.seq = seq
        return projector

    def _restore(self, state: Any) -> None:
        raise NotImplementedError


class ChunkMissing(Exception):
    """A chunk the snapshot's manifest names is absent or not the one it names: the snapshot
    is ignored and the projection is folded from the log instead."""


ChunkLoader = Callable[[str, int, str], Any]
"""``(chunk name, seq, body_sha256) -> body`` of a stored chunk (ChunkMissing if it is not
exactly that one)."""


class ChunkedProjector(Projector):
    """A projector whose answer grows with the history (one entry per episode), snapshotted
    as a small head plus immutable-once-complete chunks, so a snapshot costs what changed
    since the previous one, not the whole answer.

    The head (``dump``) carries a manifest ``name -> (seq, body_sha256, ...)`` of every
    chunk, and is itself covered by its row's digest: a chunk is used only when its stored
    row is exactly the one the trusted head names. Chunks not resident are loaded through
    ``loader`` when an event touches them or an answer reads them; ``evict`` drops the clean
    ones, so a long-lived writer holds the head and the chunks in progress, not the answer.
    """

    def __init__(self) -> None:
        super().__init__()
        self.loader: ChunkLoader | None = None

    def dirty_chunks(self) -> Iterator[tuple[str, Any]]:
        """``(name, body)`` of every chunk changed since it was last stored."""
        raise NotImplementedError

    def chunk_stored(self, name: str, seq: int, sha256: str) -> None:
        """The store wrote chunk ``name`` at ``seq`` with ``sha256``: record it, mark clean."""
        raise NotImplementedError

    def evict(self) -> None:
        """Drop the resident chunks that are stored and unchanged (reloaded on demand)."""
        raise NotImplementedError

    def load_all(self) -> None:
        """Make every chunk resident (ChunkMissing if one cannot be loaded)."""
        raise NotImplementedError


def _registry() -> dict[str, type[Projector]]:
    from store.projections.asset_outcomes import AssetOutcomes
    from store.projections.collection_report import CollectionReport
    from store.projections.forensics import ForensicsProjector
    from store.projections.preparation_report import PreparationReport
    from store.projections.run_digest import RunDigest
    from store.projections.run_report import RunReport

    kinds = (
        RunDigest, ForensicsProjector, AssetOutcomes, CollectionReport, PreparationReport,
        RunReport,
    )
    return {cls.KIND: cls for cls in kinds}


SNAPSHOTTED: dict[str, type[Projector]] = {}


def snapshotted() -> dict[str, type[Projector]]:
    """Every projection the store snapshots, by kind (filled on first use: no import cycle)."""
    if not SNAPSHOTTED:
        SNAPSHOTTED.update(_registry())
    return SNAPSHOTTED
