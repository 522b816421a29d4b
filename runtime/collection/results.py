"""What a collection session returns: the log's view of the run after it, as in `report.json`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from runtime.collection.plan import CollectionPlan
from runtime.files import write_json_atomic, write_stream_atomic
from runtime.json_text import NotPlainJSON, stream_indented_json
from store.gc_pause import gc_paused
from store.projections.incremental import ChunkMissing

log = structlog.get_logger(__name__)

REPORT_NAME = "report.json"


@dataclass(frozen=True)
class EpisodeOutcome:
    """Acceptance and reset submission of one done episode (not a persistence receipt)."""

    episode_index: int
    accepted: bool
    reset_submitted: bool


@dataclass(frozen=True)
class BatchOutcome:
    batch_index: int
    asset_set_id: str
    episodes: tuple[EpisodeOutcome, ...]
    close_finalized: bool


@dataclass(frozen=True)
class CollectionResult:
    """What the log says after this session; identical to `report.json`.

    ``unlogged_recordings`` lists trajectory files found on disk that the log never
    recorded (written just before a crash); they were moved to ``quarantine/<session_id>/``
    and their episodes re-run.
    """

    run_id: str
    batches: tuple[BatchOutcome, ...]
    report_path: Path
    environment_constructions: int
    unlogged_recordings: tuple[Path, ...] = ()

    @property
    def accepted(self) -> int:
        return sum(e.accepted for b in self.batches for e in b.episodes)


def report_path_of(plan: CollectionPlan) -> Path:
    return plan.output_dir / REPORT_NAME


def write_report(
    store: Any, run_id: str, path: Path, fence: Any | None = None
) -> dict[str, Any]:
    """Write `report.json` from the log (the same projection `show --json` prints): the
    store's snapshotted ``collection_report`` + the events since it, so the cost is the
    tail, not the history; the text is streamed chunk by chunk (memory: a chunk of
    episodes, not the report); ``fence`` (the session) is checked right before it is
    published. Returns the report with each episode reduced to what
    :func:`result_from_report` reads (``episode_index``, ``accepted``, ``reset_submitted``).

    A snapshot chunk that turns out missing or corrupt while streaming costs a full fold
    (nothing half-written is published): the file is always the whole log's projection."""
    with gc_paused():  # the report is as long as the episode list (store.gc_pause)
        try:
            return _stream_report(store, run_id, path, fence)
        except (ChunkMissing, NotPlainJSON) as exc:
            log.warning("report_not_streamed", run_id=run_id, reason=str(exc))
        report = store.fold_projection(run_id, "collection_report").report()
        write_json_atomic(path, report, fence=fence)
        return report


def print_report(store: Any, run_id: str, write: Any) -> None:
    """``show --json``: the text of `report.json` passed to ``write`` in pieces, streamed from
    the snapshot chunks like :func:`write_report` (memory: a chunk). Every chunk is loaded
    once before the first byte is written (a chunk that is missing or corrupt costs a full
    fold instead, never half a report)."""
    with gc_paused():
        projector = store.project(run_id, "collection_report", lazy=True)
        try:
            for cid in projector.chunk_ids():
                projector.peek(cid)
        except ChunkMissing as exc:
            log.warning("snapshot_ignored", run_id=run_id, kind="collection_report",
                        reason=str(exc))
            projector = store.fold_projection(run_id, "collection_report")
        stream_indented_json(projector.report_skeleton(), write)
        write("\n")


def _stream_report(store: Any, run_id: str, path: Path, fence: Any | None) -> dict[str, Any]:
    projector = store.project(run_id, "collection_report", lazy=True)
    outcomes: dict[int, list[dict[str, Any]]] = {}

    def keep(batch_index: int, entry: dict[str, Any]) -> None:
        outcomes.setdefault(batch_index, []).append({
            "episode_index": entry["episode_index"], "accepted": entry["accepted"],
            "reset_submitted": entry["reset_submitted"],
        })

    report = projector.report_skeleton(keep)

    def produce(handle: Any) -> None:
        stream_indented_json(report, lambda text: handle.write(text.encode("utf-8")))
        handle.write(b"\n")

    write_stream_atomic(path, produce, fence=fence)
    for batch in report["batches"]:
        batch["episodes"] = outcomes.get(batch["batch_index"], [])
    return report


def result_from_report(
    run_id: str, report: dict[str, Any], path: Path, unlogged: tuple[Path, ...] = ()
) -> CollectionResult:
    batches = tuple(
        BatchOutcome(
            batch_index=b["batch_index"],
            asset_set_id=b["asset_set_id"],
            episodes=tuple(
                EpisodeOutcome(e["episode_index"], e["accepted"], e["reset_submitted"])
                for e in b["episodes"]
            ),
            close_finalized=b["close_finalized"],
        )
        for b in report["batches"]
    )
    return CollectionResult(
        run_id=run_id,
        batches=batches,
        report_path=path,
        environment_constructions=report["environment_constructions"],
        unlogged_recordings=unlogged,
    )
