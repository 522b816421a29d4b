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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from domain.errors import AssetcastInputError
from runtime.collection import (
    CollectionResult,
    collect,
    end_session,
    refuse_bad_collection_input,
    run_collection,
)
from runtime.collection.executors.options import ExecutorOptions
from runtime.collection.plan import CollectionRefused, plan_from_state
from runtime.collection.recordings import verify_committed
from runtime.collection.repair import RestoredEpisode, repair_committed
from runtime.session import CollectorSession
from store.records import NewEvent

log = structlog.get_logger(__name__)


class NothingToResume(AssetcastInputError):
    """The run is finished (completed, or prepared when preparing was all it was for)."""


def _phase(state: Any) -> str:
    return state.failed_from if state.state == "failed" else state.state


@dataclass(frozen=True)
class RepairResult:
    run_id: str
    restored: tuple[RestoredEpisode, ...]


def repair_run(
    run_id: str, *, store: Any, environment_factory: Any = None
) -> RepairResult:
    """Re-run every committed episode whose file is missing or corrupt and restore its files
    if the re-run reproduces the logged SHA-256s (else ``RepairRefused`` naming the episode;
    nothing of that episode is written). Under the run's lease; the log is not changed.
    Refuses a broken chain or altered deployments/snapshots first, like resume."""
    store.require_intact_chain(run_id)
    _require_intact_inputs(run_id, store)
    session = CollectorSession.open(store, run_id)
    try:
        state = store.state(run_id)
        try:
            plan = plan_from_state(run_id, state)
        except CollectionRefused:  # nothing was ever materialized: nothing committed
            restored: tuple[RestoredEpisode, ...] = ()
        else:
            restored = repair_committed(
                plan, fence=session, environment_factory=environment_factory
            )
    except BaseException as error:
        end_session(session, error)
        raise
    end_session(session, None)
    return RepairResult(run_id, restored)


def resume(
    run_id: str,
    *,
    store: Any,
    providers_by_role: Mapping[str, Any] | None = None,
    repair: bool = False,
    **collect_kwargs: Any,
) -> Any:
    """Continue ``run_id``; returns a ``CollectionResult`` (or a ``PreparationResult`` when the
    run's goal was only ``prepare``). ``collect_kwargs`` are those of ``collect``.

    ``repair``: first :func:`repair_run`; a completed run then returns its ``RepairResult``.
    A run whose hash chain does not verify is refused (``ChainBroken``) before anything
    is appended."""
    if repair:
        repaired = repair_run(
            run_id, store=store, environment_factory=collect_kwargs.get("environment_factory")
        )
        if store.state(run_id).state == "completed":
            return repaired
    store.require_intact_chain(run_id)
    _require_intact_inputs(run_id, store)
    options = ExecutorOptions(
        collect_kwargs.get("workers", 1), collect_kwargs.get("ray_address"),
        collect_kwargs.get("episode_deadline_s"),
    ).check()
    with options.connected():  # Ray up before the lease: unreachable is exit 2
        return _resume_checked(run_id, store=store, providers_by_role=providers_by_role,
                               **collect_kwargs)


def _resume_checked(
    run_id: str, *, store: Any, providers_by_role: Mapping[str, Any] | None,
    **collect_kwargs: Any,
) -> Any:
    state = store.state(run_id)
    goal = state.goal
    if state.state == "completed":
        raise NothingToResume(f"run {run_id} is already completed")
    phase = _phase(state)
    if phase == "preparing":
        from runtime.prepare import resume_preparation

        prepared = resume_preparation(run_id, store=store, providers_by_role=providers_by_role)
        if goal != "run":
            return prepared
        return collect(run_id, store=store, **collect_kwargs)
    if state.state == "prepared":
        if goal != "run":
            raise NothingToResume(
                f"run {run_id} is already prepared, which is all its goal "
                f"'{goal}' asked for; use collect to collect it"
            )
        return collect(run_id, store=store, **collect_kwargs)
    if phase not in ("prepared", "collecting"):
        raise NothingToResume(f"run {run_id} is {state.state} and cannot be resumed")
    return _resume_collection(run_id, store=store, **collect_kwargs)


class RunDataAltered(AssetcastInputError):
    """A deployment or cache snapshot differs from the digests in the run's log."""


def _require_intact_inputs(run_id: str, store: Any) -> None:
    """Deployments and cache snapshots must still match their chained digests before a
    session builds on them (committed trajectories are checked under the lease). Only the
    preparation prefix of the log names them, so only it is read."""
    from runtime.verify import preparation_prefix, verify_events

    events = preparation_prefix(store.iter_events(run_id))
    result = verify_events(run_id, events, trajectories=False)
    if result.problems:
        more = len(result.problems) - 1
        raise RunDataAltered(
            f"run {run_id}: {result.problems[0]}"
            + (f" (and {more} more problem(s))" if more else "")
            + "; refusing to resume (see `assetcast verify`)"
        )


def _resume_collection(run_id: str, *, store: Any, **collect_kwargs: Any) -> Any:
    """Failed-from-prepared or collecting/failed-from-collecting: RunResumed, then collect."""
    session = CollectorSession.open(store, run_id)
    try:
        result = _resume_under_lease(run_id, store=store, session=session, **collect_kwargs)
    except BaseException as error:
        end_session(session, error)
        raise
    end_session(session, None)
    return result


def _resume_under_lease(
    run_id: str, *, store: Any, session: CollectorSession, **collect_kwargs: Any
) -> Any:
    # Re-read under the lease: the run may have moved on while we waited for it.
    state = store.state(run_id)
    phase = _phase(state)
    if state.state == "completed" or phase not in ("prepared", "collecting"):
        raise NothingToResume(f"run {run_id} is {state.state} and cannot be resumed here")
    plan = plan_from_state(
        run_id, state, episodes_per_batch=collect_kwargs.get("episodes_per_batch")
    )
    verify_committed(run_id, plan.output_dir, plan.committed())
    # Bad input is refused before RunResumed: exit 2 must mean nothing was recorded.
    ExecutorOptions(
        collect_kwargs.get("workers", 1), collect_kwargs.get("ray_address")
    ).check()
    refuse_bad_collection_input(
        plan,
        collect_kwargs.get("initial_checks"),
        collect_kwargs.get("final_checks"),
        collect_kwargs.get("environment_factory"),
    )
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
