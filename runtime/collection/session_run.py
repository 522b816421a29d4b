"""One collecting session under a held lease: inputs checked, the pass run, the report written.

The same function serves a first collection (:func:`runtime.collection.collect`) and a
resumed one (``runtime.resume``). Before anything runs, bad input is refused with nothing
recorded, committed trajectories are verified against disk (unless the caller just did so),
files on disk the log does not name are moved to quarantine and a preparation report a kill
left stale is rewritten (:mod:`runtime.collection.reports_at_rest`). On any exception,
KeyboardInterrupt included, the driver records the failure (`RunFailed`), ``report.json`` is
still written (unless the lease was lost: the run is another session's then), and the
original exception propagates with its identity; secondary failures become notes on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.task import CheckSpec
from runtime.collection.driver import Driver
from runtime.collection.environment import EnvironmentFactory
from runtime.collection.executors import WorkSettings
from runtime.collection.executors.options import ExecutorOptions
from runtime.collection.plan import CollectionPlan, plan_from_state
from runtime.collection.recordings import quarantine_unlogged, verify_committed
from runtime.collection.refusals import refuse_bad_collection_input
from runtime.collection.reports_at_rest import restore_preparation_report
from runtime.collection.results import (
    CollectionResult,
    report_path_of,
    result_from_report,
    write_report,
)
from runtime.session import CollectorSession, SessionLost


def run_collection(
    run_id: str,
    *,
    store: Any,
    session: CollectorSession,
    initial_checks: Sequence[CheckSpec] | None = None,
    final_checks: Sequence[CheckSpec] | None = None,
    environment_factory: EnvironmentFactory | None = None,
    episodes_per_batch: int | None = None,
    progress: bool = True,
    verified: bool = False,
    plan: CollectionPlan | None = None,
    datasets: Sequence[Any] = (),
    workers: int = 1,
    ray_address: str | None = None,
    keep_rejected: bool = False,
    episode_deadline_s: float | None = None,
) -> CollectionResult:
    """Collect (or continue collecting) ``run_id`` under an already-held ``session``.

    Used by :func:`collect` for a prepared run and by ``resume`` for an interrupted one.
    Committed trajectories are verified against disk first unless the caller did so;
    ``plan`` (built by the caller from the state it just read) saves building it again.
    ``workers``/``ray_address`` choose the executor (:mod:`runtime.collection.executors`).
    """
    options = ExecutorOptions(workers, ray_address, episode_deadline_s).check()
    state = store.state(run_id)
    version = state.version
    if plan is None:
        plan = plan_from_state(run_id, state, episodes_per_batch=episodes_per_batch)
    initial, final, factory = refuse_bad_collection_input(
        plan, initial_checks, final_checks, environment_factory
    )
    committed = plan.committed()
    if not verified:
        verify_committed(run_id, plan.output_dir, committed)
    unlogged = quarantine_unlogged(run_id, plan.output_dir, committed, session.session_id)
    restore_preparation_report(store, run_id, plan.output_dir, session)
    live = None
    if datasets:
        from runtime.export.live import LiveDatasets

        live = LiveDatasets(run_id, datasets, store, before_publish=session.check)
    settings = WorkSettings(
        factory=factory,
        settle_steps=plan.settle_steps,
        record=plan.record_trajectory,
        initial_checks=initial,
        final_checks=final,
        run_id=run_id,
        keep_rejected=keep_rejected,
    )
    driver = Driver(
        store,
        session,
        plan,
        version,
        executor=options.build(settings),
        progress=progress,
        datasets=live,
        keep_rejected=keep_rejected,
    )
    path = report_path_of(plan)
    try:
        try:
            driver.run()
        except BaseException as error:
            driver.fail(error)
            if isinstance(error, SessionLost) or session.lost is not None:
                raise  # the run is another session's now: its report is not ours to write
            try:
                write_report(store, run_id, path, session)
            except BaseException as report_error:
                error.add_note(
                    f"Collection report also failed: {type(report_error).__name__}: "
                    f"{report_error}"
                )
            raise
    finally:
        driver.ledger.close()
        driver.executor.shutdown()
        if live is not None:
            live.close()
    report = write_report(store, run_id, path, session)
    return result_from_report(run_id, report, path, unlogged)
