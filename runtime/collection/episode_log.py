"""An episode's log lines, which are claims about the ledger and so wait for it.

``trajectory_committed`` says the log holds the episode's `TrajectoryCommitted`; since the
driver's appends lag behind the simulator on purpose (:mod:`runtime.collection.ledger`),
the lines are emitted by the append's ``on_durable`` callback, never at submission.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from runtime.collection.episode import EpisodeRun

log = structlog.get_logger(__name__)


def episode_logger(
    run_id: str, run: EpisodeRun, committed: dict[str, Any] | None
) -> Callable[[], None]:
    """The callback that logs ``run`` once its events are durable."""
    return lambda: log_episode(run_id, run, committed)


def log_episode(run_id: str, run: EpisodeRun, committed: dict[str, Any] | None) -> None:
    """The episode's log lines; run once its events are in the log (never before)."""
    judged = next(p for kind, p in run.events if kind == "EpisodeJudged")
    log.info(
        "episode_judged",
        run_id=run_id,
        batch_index=run.batch_index,
        episode_index=run.episode_index,
        accepted=run.accepted,
        reason=judged["reason"],
    )
    if committed is not None:
        log.info(
            "trajectory_committed",
            run_id=run_id,
            batch_index=run.batch_index,
            episode_index=run.episode_index,
            path=committed["path"],
            bytes=committed["bytes"],
            sha256=committed["sha256"],
        )
