"""A repair as a session of its own: the lease taken, damaged files restored, the repair logged.

``resume --repair`` of a completed run is only this; a collecting or failed run is repaired
inside the resume's own session (:func:`repair_under_lease`), which then continues it. Either
way the restored files are on disk (fsynced, renamed under the fence) before the
`CommittedFilesRepaired` event is appended (fenced by the same lease), and the event is in
the log before anyone is told (the log line, ``on_repaired``, the CLI's lines).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog

from runtime.collection.collect_prepared import leased_session
from runtime.collection.plan import CollectionPlan, CollectionRefused, plan_from_state
from runtime.collection.repair import RestoredEpisode, repair_committed, repair_event
from runtime.collection.repair_scan import RepairScan, scan_committed
from runtime.run_inputs import VerifiedInputs, verified_or_check
from runtime.session import CollectorSession
from store.records import NewEvent

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RepairResult:
    run_id: str
    restored: tuple[RestoredEpisode, ...]
    seq: int | None = None  # the `CommittedFilesRepaired` event that records them


def repair_run(
    run_id: str,
    *,
    store: Any,
    environment_factory: Any = None,
    verified: VerifiedInputs | None = None,
) -> RepairResult:
    """Re-run every committed episode whose file is missing or corrupt and restore its files
    if the re-run reproduces the logged SHA-256s (else ``RepairRefused`` naming the episode;
    nothing is written). Under the run's lease; what was restored is recorded as one
    `CommittedFilesRepaired` event. Refuses a broken chain or altered deployments/snapshots
    first, like resume, unless ``verified`` says that was just checked."""
    verified_or_check(run_id, store, verified)
    with leased_session(store, run_id) as session:
        state = store.state(run_id)
        try:
            plan = plan_from_state(run_id, state)
        except CollectionRefused:  # nothing was ever materialized: nothing committed
            return RepairResult(run_id, ())
        return repair_under_lease(
            plan, store=store, session=session, version=state.version,
            environment_factory=environment_factory, scan=scan_committed(plan),
        )


def repair_under_lease(
    plan: CollectionPlan, *, store: Any, session: CollectorSession, version: int,
    environment_factory: Any, scan: RepairScan,
) -> RepairResult:
    """Restore what ``scan`` found damaged, then record it (fenced, durable) before anyone
    is told (the log line, the CLI's ``restored ...`` lines come after the append)."""
    restored = repair_committed(
        plan, fence=session, environment_factory=environment_factory, scan=scan
    )
    if not restored:
        return RepairResult(plan.run_id, ())
    kind, payload = repair_event(session.identity(), restored)
    seq = store.append(
        plan.run_id, [NewEvent(kind, payload)], expected_version=version, fence=session.lease
    )
    log.warning(
        "committed_files_repaired", run_id=plan.run_id, seq=seq, episodes=len(restored),
        files=sum(len(episode.paths) for episode in restored),
    )
    return RepairResult(plan.run_id, restored, seq)
