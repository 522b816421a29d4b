"""Projections that can be snapshotted: applied one event at a time, dumped to JSON values and
restored from them, so a report on a long run costs its tail, not its history.

A projector's state must stay bounded by the size of its answer (per batch, per session,
per unfinished episode), never by the number of events. ``VERSION`` is bumped whenever
``apply`` or the dumped shape changes; stored snapshots of another version are ignored.
"""

from __future__ import annotations

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


def _registry() -> dict[str, type[Projector]]:
    from store.projections.asset_outcomes import AssetOutcomes
    from store.projections.collection_report import CollectionReport
    from store.projections.forensics import ForensicsProjector
    from store.projections.preparation_report import PreparationReport
    from store.projections.run_digest import RunDigest

    kinds = (RunDigest, ForensicsProjector, AssetOutcomes, CollectionReport, PreparationReport)
    return {cls.KIND: cls for cls in kinds}


SNAPSHOTTED: dict[str, type[Projector]] = {}


def snapshotted() -> dict[str, type[Projector]]:
    """Every projection the store snapshots, by kind (filled on first use: no import cycle)."""
    if not SNAPSHOTTED:
        SNAPSHOTTED.update(_registry())
    return SNAPSHOTTED
