"""The events a collecting session records about itself, its batches and its environment.

Pure builders, one per event type (an episode's own events come from the worker and
:mod:`runtime.collection.commit`): the payloads are the log's contract with the lifecycle
fold, the projections and `forensics`, so they are written in one place, away from the
control flow that decides when to append them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime.collection.executors import BatchOpened
from runtime.collection.plan import BatchPlan, CollectionPlan
from runtime.collection.recordings import to_log_path
from runtime.session import CollectorSession

Event = tuple[str, dict[str, Any]]


def collection_started(
    session: CollectorSession, plan: CollectionPlan, recording_dir: Path | None
) -> Event:
    return (
        "CollectionStarted",
        {
            **session.identity(),
            "episodes_per_batch": plan.episodes_per_batch,
            "record_trajectory": plan.record_trajectory,
            "recording_dir": (
                to_log_path(plan.output_dir, recording_dir)
                if recording_dir is not None
                else None
            ),
        },
    )


def batch_opening(session_id: str, batch: BatchPlan, opened: BatchOpened) -> list[Event]:
    """`EnvironmentBuilt` (if the worker built one for it), `BatchStarted`, `AssetsReplaced`."""
    b = batch.batch_index
    opening: list[Event] = []
    if opened.built:
        opening.append(
            (
                "EnvironmentBuilt",
                {
                    "session_id": session_id,
                    "batch_index": b,
                    "constructions": opened.constructions,
                    "worker": opened.worker,
                },
            )
        )
    return [
        *opening,
        (
            "BatchStarted",
            {
                "batch_index": b,
                "asset_set_id": batch.asset_set_id,
                "seed": batch.seed,
                "deployment_path": str(batch.deployment_path.resolve()),
                "session_id": session_id,
                "worker": opened.worker,
            },
        ),
        (
            "AssetsReplaced",
            {
                "batch_index": b,
                "roles_replaced": list(opened.roles_replaced),
                "entities_kept": list(opened.entities_kept),
            },
        ),
    ]


def batch_finished(
    batch_index: int, *, accepted: int, attempted: int, session_id: str, worker: str
) -> Event:
    return (
        "BatchFinished",
        {
            "batch_index": batch_index,
            "accepted": accepted,
            "attempted": attempted,
            "session_id": session_id,
            "worker": worker,
        },
    )


def environment_closed(session_id: str, error: BaseException | None) -> Event:
    return (
        "EnvironmentClosed",
        {
            "session_id": session_id,
            "ok": error is None,
            "error_type": None if error is None else type(error).__name__,
            "detail": None if error is None else str(error),
        },
    )


def run_completed(plan: CollectionPlan) -> Event:
    accepted, attempted = plan.totals()
    return (
        "RunCompleted",
        {"batches": len(plan.batches), "accepted": accepted, "attempted": attempted},
    )
