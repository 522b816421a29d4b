"""Resume: finish what a run set out to do after a crash or a failure.

`RunCreated.goal` says what the run was for: ``prepare`` stops at *prepared*, ``run`` goes on
through collection. The log says how far it got. Resume takes the run's lease (refused while
a live session holds it; a dead or expired holder is taken over), records `RunResumed`, and
continues from the phase that was interrupted:

* preparing (crashed or failed): ``runtime.prepare.resume_preparation`` (which records its
  own `RunResumed`), then collection if the goal is ``run``;
* prepared with goal ``run`` (crashed between preparing and collecting): collection;
* collecting (crashed) or failed while collecting: collection continues. Every committed
  trajectory is verified against disk *before* anything is appended; a missing or altered
  one stops the resume with :class:`CommittedTrajectoryMissing` (the data loss must be seen,
  not papered over by re-collecting). Done episodes are skipped, the interrupted one is re-run
  from its start, and the remaining batches are collected on a freshly built environment.

A run already at rest (completed, or prepared with goal ``prepare``) has nothing to continue,
but a kill after its last event and before its report was written leaves that report missing
or stale: resume rewrites it from the log (:class:`ReportsRestored`, nothing appended) and
says :class:`NothingToResume` only when every report already matches the log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from domain.errors import AssetcastInputError
from runtime.collection import (
    CollectionResult,
    refuse_bad_collection_input,
    run_collection,
)
from runtime.collection.collect_prepared import collect_verified, leased_session
from runtime.collection.executors.options import ExecutorOptions
from runtime.collection.plan import plan_from_state
from runtime.collection.recordings import verify_committed
from runtime.collection.repair_scan import scan_committed
from runtime.collection.repair_session import RepairResult, repair_run, repair_under_lease
from runtime.collection.reports_at_rest import ReportsRestored, restore_reports
from runtime.run_inputs import (
    RunDataAltered,
    VerifiedInputs,
    verified_or_check,
    verify_run_inputs,
)
from runtime.session import CollectorSession
from store.records import NewEvent

__all__ = [
    "NothingToResume",
    "RepairResult",
    "ReportsRestored",
    "RunDataAltered",
    "VerifiedInputs",
    "repair_run",
    "resume",
    "verify_run_inputs",
]

log = structlog.get_logger(__name__)


class NothingToResume(AssetcastInputError):
    """The run is finished (completed, or prepared when preparing was all it was for)."""


def _phase(state: Any) -> str:
    return state.failed_from if state.state == "failed" else state.state


Repaired = Callable[[RepairResult], None]


def resume(
    run_id: str,
    *,
    store: Any,
    providers_by_role: Mapping[str, Any] | None = None,
    repair: bool = False,
    verified: VerifiedInputs | None = None,
    on_repaired: Repaired | None = None,
    **collect_kwargs: Any,
) -> Any:
    """Continue ``run_id``; returns a ``CollectionResult`` (or a ``PreparationResult`` when the
    run's goal was only ``prepare``). ``collect_kwargs`` are those of ``collect``.

    A run whose hash chain does not verify is refused (``ChainBroken``) before anything
    is appended, and one whose deployments or snapshots changed (``RunDataAltered``); a
    caller that just ran :func:`verify_run_inputs` hands its result as ``verified``.

    ``repair``: damaged committed files are first restored and recorded, as by
    :func:`repair_run`, in the same session that then continues the run; a completed run
    returns its ``RepairResult``. ``on_repaired`` is told what was restored as soon as it
    is recorded. Each check runs once: the repair's scan hashes every committed file, so
    the collection that follows does not verify them again."""
    verified = verified_or_check(run_id, store, verified)
    options = ExecutorOptions(
        collect_kwargs.get("workers", 1), collect_kwargs.get("ray_address"),
        collect_kwargs.get("episode_deadline_s"),
    ).check()
    if repair and store.state(run_id).state == "completed":
        repaired = repair_run(
            run_id, store=store, environment_factory=collect_kwargs.get("environment_factory"),
            verified=verified,
        )
        if on_repaired is not None:
            on_repaired(repaired)
        return repaired
    with options.connected():  # Ray up before the lease: unreachable is exit 2
        return _resume_checked(run_id, store=store, providers_by_role=providers_by_role,
                               repair=repair, on_repaired=on_repaired, **collect_kwargs)


def _resume_checked(
    run_id: str, *, store: Any, providers_by_role: Mapping[str, Any] | None,
    repair: bool, on_repaired: Repaired | None, **collect_kwargs: Any,
) -> Any:
    state = store.state(run_id)
    goal = state.goal
    if state.state == "completed":
        return _restore_reports_at_rest(
            run_id, store, state, f"run {run_id} is already completed"
        )
    phase = _phase(state)
    if repair and phase != "collecting" and on_repaired is not None:
        on_repaired(RepairResult(run_id, ()))  # nothing was collected: nothing committed
    if phase == "preparing":
        from runtime.prepare import resume_preparation

        prepared = resume_preparation(run_id, store=store, providers_by_role=providers_by_role)
        if goal != "run":
            return prepared
        return collect_verified(run_id, store=store, **collect_kwargs)
    if state.state == "prepared":
        if goal != "run":
            return _restore_reports_at_rest(
                run_id, store, state,
                f"run {run_id} is already prepared, which is all its goal "
                f"'{goal}' asked for; use collect to collect it",
            )
        return collect_verified(run_id, store=store, **collect_kwargs)
    if phase not in ("prepared", "collecting"):
        raise NothingToResume(f"run {run_id} is {state.state} and cannot be resumed")
    return _resume_collection(
        run_id, store=store, repair=repair and phase == "collecting", on_repaired=on_repaired,
        **collect_kwargs,
    )


def _restore_reports_at_rest(
    run_id: str, store: Any, state: Any, nothing_to_do: str
) -> ReportsRestored:
    """The reports of a run at rest rewritten where they differ from the log, under its
    lease; ``NothingToResume(nothing_to_do)`` if every one already matches."""
    output_dir = Path(state.created["output_dir"])
    with leased_session(store, run_id) as session:
        restored = restore_reports(
            store, run_id, output_dir, session, collected=state.state == "completed"
        )
    if not restored.paths:
        raise NothingToResume(nothing_to_do)
    return restored


def _resume_collection(
    run_id: str, *, store: Any, repair: bool, on_repaired: Repaired | None,
    **collect_kwargs: Any,
) -> Any:
    """Failed-from-prepared or collecting/failed-from-collecting: (repair,) RunResumed, then
    collect, all in one session."""
    with leased_session(store, run_id) as session:
        return _resume_under_lease(
            run_id, store=store, session=session, repair=repair, on_repaired=on_repaired,
            **collect_kwargs,
        )


def _resume_under_lease(
    run_id: str, *, store: Any, session: CollectorSession, repair: bool,
    on_repaired: Repaired | None, **collect_kwargs: Any,
) -> Any:
    # Re-read under the lease: the run may have moved on while we waited for it.
    state = store.state(run_id)
    phase = _phase(state)
    if state.state == "completed" or phase not in ("prepared", "collecting"):
        raise NothingToResume(f"run {run_id} is {state.state} and cannot be resumed here")
    plan = plan_from_state(
        run_id, state, episodes_per_batch=collect_kwargs.get("episodes_per_batch")
    )
    scan = scan_committed(plan) if repair else None
    if scan is None:
        verify_committed(run_id, plan.output_dir, plan.committed())
    # Bad input is refused before the repair and RunResumed: exit 2 must mean nothing was
    # recorded.
    ExecutorOptions(
        collect_kwargs.get("workers", 1), collect_kwargs.get("ray_address")
    ).check()
    refuse_bad_collection_input(
        plan,
        collect_kwargs.get("initial_checks"),
        collect_kwargs.get("final_checks"),
        collect_kwargs.get("environment_factory"),
    )
    if scan is not None:
        # Every committed file was hashed by the scan and is intact or restored now.
        repaired = repair_under_lease(
            plan, store=store, session=session, version=state.version,
            environment_factory=collect_kwargs.get("environment_factory"), scan=scan,
        )
        if on_repaired is not None:
            on_repaired(repaired)
        if repaired.seq is not None:
            state = store.state(run_id)
    from_state, to_state = state.state, phase
    if from_state != "prepared":  # prepared->prepared is not a transition; nothing to record
        store.append(
            run_id,
            [
                NewEvent(
                    "RunResumed",
                    {**session.identity(), "from_state": from_state, "to_state": to_state},
                )
            ],
            expected_version=state.version,
            fence=session.lease,
        )
    log.info(
        "run_resumed",
        run_id=run_id,
        session_id=session.session_id,
        from_state=from_state,
        to_state=to_state,
        done_episodes=len(plan.done),
        committed=len(plan.committed()),
    )
    if to_state == "prepared" and plan.goal != "run":
        log.info("resume_stops_at_prepared", run_id=run_id, goal=plan.goal)
        return None
    result: CollectionResult = run_collection(
        run_id, store=store, session=session, verified=True, plan=plan,
        **collect_kwargs,
    )
    return result
