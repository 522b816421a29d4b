"""Collection's driver: the run's single writer, turning executor reports into the ledger.

The driver holds the run's lease. It hands the batches still to do to an executor
(:mod:`runtime.collection.executors`), whose workers each build ONE environment and reuse it
across their batches (per batch only the role bodies are replaced). Every episode resets
with its derived seed (:func:`runtime.seeds.episode_seed`), settles, runs the initial checks
(which gate execution), the program, the measured checks (which gate acceptance), and asks
its environment to return to its nominal state (``env.reset(None)``; `ResetSubmitted` is
logged only once that call returned). The worker returns the episode's facts and its files'
bytes; the driver writes the files durably (:mod:`runtime.collection.commit`) and then
appends the episode's events in one transaction, so the log never claims a file that is not
on disk, and a crash at any instant leaves either the whole episode or nothing of it.

Appends are pipelined: a single writer thread (:mod:`runtime.collection.ledger`) appends
episode N's transaction while episode N+1 runs, in order. The writer is drained before the
environment is reported closed, before `RunFailed`, and wherever the driver needs the run's
version, and an append error is raised (the same object) in this thread at the next
submission or drain. A SIGKILL can therefore lose the last episode or two: their files may
be on disk unlogged, which resume moves to quarantine and re-runs.

The same code serves a first collection and a resumed one: the plan is read from the log,
done episodes (commit-or-discard logged) are skipped, and the rest are run from their start.
On any exception, KeyboardInterrupt included, the environment is still closed, the failure
(phase, position, traceback) is appended as `RunFailed`, `report.json` is written, and the
original exception propagates with its identity; secondary failures become notes on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import filterfalse
from typing import Any

import structlog

from domain.errors import mark_recorded
from domain.task import CheckSpec
from runtime.collection.commit import episode_events
from runtime.collection.environment import EnvironmentFactory
from runtime.collection.episode import EpisodeRun
from runtime.collection.executors import (
    BatchDone,
    BatchOpened,
    BatchWork,
    EpisodeDone,
    Executor,
    Report,
    WorkSettings,
)
from runtime.collection.executors.options import ExecutorOptions
from runtime.collection.ledger import LedgerWriter, Tag
from runtime.collection.plan import (
    BatchPlan,
    CollectionPlan,
    CollectionRefused,
    EpisodeRecord,
    plan_from_state,
)
from runtime.collection.progress import progress_bar
from runtime.collection.recordings import (
    quarantine_unlogged,
    session_recording_dir,
    to_log_path,
    verify_committed,
)
from runtime.collection.refusals import refuse_bad_collection_input
from runtime.collection.results import (
    CollectionResult,
    report_path_of,
    result_from_report,
    write_report,
)
from runtime.session import CollectorSession, SessionLost, run_failed_payload

log = structlog.get_logger(__name__)

REJECTED_DIR = "rejected"  # --keep-rejected: rejected episodes' files, by session
# Jobs the ledger writer may hold besides the one it is writing (see collection.ledger):
# a SIGKILL loses at most this many + 1 episodes' events. 0 appends synchronously, which
# bench/bench_collect.py uses to measure what the pipeline saves.
LEDGER_PIPELINE_DEPTH = 1
Events = Sequence[tuple[str, dict[str, Any]]]


class Driver:
    """One session's pass over the plan; owns the executor and the ledger writer (which
    tracks the run's version)."""

    def __init__(
        self,
        store: Any,
        session: CollectorSession,
        plan: CollectionPlan,
        version: int,
        *,
        executor: Executor,
        progress: bool,
        datasets: Any = None,
        keep_rejected: bool = False,
    ) -> None:
        self.store = store
        self.datasets = datasets
        self.session = session
        self.plan = plan
        self.run_id = plan.run_id
        self.writer = LedgerWriter(
            store, plan.run_id, version, before_append=session.raise_if_lost,
            fence=session.lease, depth=LEDGER_PIPELINE_DEPTH,
        )
        self.executor = executor
        self.progress = progress
        self.deferred: list[tuple[str, dict[str, Any]]] = []
        self.phase = "start"
        self.batch_index: int | None = None
        self.episode_index: int | None = None
        self.recording_dir = (
            session_recording_dir(plan.output_dir, session.session_id)
            if plan.record_trajectory
            else None
        )
        self.rejected_dir = (
            plan.output_dir / REJECTED_DIR / f"run_{session.session_id}"
            if keep_rejected and plan.record_trajectory
            else None
        )
        self._todo: dict[int, tuple[int, ...]] = {}
        self._workers: dict[int, str] = {}  # batch -> the worker that opened it last

    # ------------------------------------------------------------------ ledger

    def append(self, events: Events, on_durable: Callable[[], None] | None = None) -> None:
        """Submit ``events`` (after any deferred ones) as one transaction to the writer.

        The append itself happens on the writer thread while the caller goes on; an earlier
        append's error is raised here (see :mod:`runtime.collection.ledger`).
        ``on_durable`` runs once the transaction is committed.
        """
        self.session.raise_if_lost()
        ready = self.datasets.take_events() if self.datasets else []
        batch = [*self.deferred, *ready, *events]
        self.writer.submit(
            batch, Tag(self.phase, self.batch_index, self.episode_index), on_durable
        )
        self.deferred = []

    def append_now(self, events: Events) -> None:
        """Append and wait until it (and everything before it) is in the log."""
        self.append(events)
        self.writer.drain()

    def defer(self, events: Events) -> None:
        """Hold ``events`` for the next append: each durable commit costs an fsync, so a batch's
        opening events ride along with its first episode. Losing them in a crash is harmless
        (a resumed session re-opens the batch); a failure flushes them before `RunFailed`."""
        self.deferred.extend(events)

    # ------------------------------------------------------------------ the pass

    def run(self) -> None:
        plan = self.plan
        # Synchronous: a refusal (stale version, lost lease) stops us before the build.
        self.append_now(
            [
                (
                    "CollectionStarted",
                    {
                        **self.session.identity(),
                        "episodes_per_batch": plan.episodes_per_batch,
                        "record_trajectory": plan.record_trajectory,
                        "recording_dir": (
                            to_log_path(plan.output_dir, self.recording_dir)
                            if self.recording_dir is not None
                            else None
                        ),
                    },
                )
            ]
        )
        # A crash may have cut a previous session between its last batch and the dataset
        # update that followed; bring the datasets up to date before anything new is done.
        self.update_datasets()
        pending = plan.pending_batches()
        log.info(
            "collection_started",
            run_id=self.run_id,
            session_id=self.session.session_id,
            batches=len(plan.batches),
            pending_batches=len(pending),
            episodes_per_batch=plan.episodes_per_batch,
            done_episodes=len(plan.done),
        )
        works = [self.work_of(batch) for batch in pending]
        bar = progress_bar(plan, self.progress)
        stream = self.executor.run(works)
        try:
            for report in self._reports(stream):
                self.handle(report, bar)
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
            bar.close()
        self.batch_index = self.episode_index = None
        self.finish_datasets()
        accepted, attempted = plan.totals()
        completed = (
            "RunCompleted",
            {"batches": len(plan.batches), "accepted": accepted, "attempted": attempted},
        )
        # EnvironmentClosed and RunCompleted share one transaction (one fsync).
        self.close_environment(then=[completed])
        log.info("collection_completed", run_id=self.run_id, accepted=accepted, attempted=attempted)

    def work_of(self, batch: BatchPlan) -> BatchWork:
        # C-level filtering: a batch may plan 10^6 episodes, most of them done on resume.
        done = {j for b, j in self.plan.done if b == batch.batch_index}
        todo = tuple(filterfalse(done.__contains__, range(self.plan.episodes_per_batch)))
        self._todo[batch.batch_index] = todo
        return BatchWork(
            batch_index=batch.batch_index,
            asset_set_id=batch.asset_set_id,
            seed=batch.seed,
            deployment_path=batch.deployment_path,
            manifest_sha256=batch.manifest_sha256,
            episodes=todo,
        )

    def _reports(self, stream: Iterator[Report]) -> Iterator[Report]:
        """The executor's reports; an error from it is placed where its worker was."""
        while True:
            try:
                report = next(stream)
            except StopIteration:
                return
            except BaseException:
                where = self.executor.where
                if where is not None:
                    self.phase, self.batch_index, self.episode_index = (
                        where.phase, where.batch_index, where.episode_index
                    )
                raise
            yield report

    def handle(self, report: Report, bar: Any) -> None:
        if isinstance(report, BatchOpened):
            self.batch_opened(report, bar)
        elif isinstance(report, EpisodeDone):
            self.episode_done(report.run, bar)
        elif isinstance(report, BatchDone):
            self.batch_done(report.batch_index)
        else:  # pragma: no cover - the executor interface has exactly these reports
            raise TypeError(f"unknown executor report {report!r}")

    def batch_opened(self, opened: BatchOpened, bar: Any) -> None:
        plan = self.plan
        b = opened.batch_index
        batch = next(x for x in plan.batches if x.batch_index == b)
        self.batch_index, self.episode_index = b, None
        opening: list[tuple[str, dict[str, Any]]] = []
        session_id = self.session.session_id
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
        self._workers[b] = opened.worker
        done_before = plan.batch_counts(b)[1]
        self.defer(
            [
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
        )
        log.info(
            "batch_started",
            run_id=self.run_id,
            batch_index=b,
            asset_set_id=batch.asset_set_id,
            seed=batch.seed,
            roles_replaced=list(opened.roles_replaced),
            episodes_already_done=done_before,
            worker=opened.worker,
        )
        bar.set_postfix(batch=f"{b + 1}/{len(plan.batches)}", accepted=plan.totals()[0])
        self.phase = "episode"

    def episode_done(self, run: EpisodeRun, bar: Any) -> None:
        plan = self.plan
        b, j = run.batch_index, run.episode_index
        self.phase, self.batch_index, self.episode_index = "episode", b, j
        events, committed = episode_events(
            run, output_dir=plan.output_dir, recording_dir=self.recording_dir,
            fence=self.session, rejected_dir=self.rejected_dir,
        )
        record = EpisodeRecord(run.accepted, committed, run.reset_error is None)
        if run.reset_error is not None:
            self._record_unreset_episode(events, run.reset_error)
            raise run.reset_error
        if j == self._todo[b][-1]:
            # The batch's last episode and BatchFinished share one transaction.
            events.append(self._batch_finished(b, extra=record))
        # Queued: the writer appends it while the next episode runs; the episode's log
        # lines are emitted only once its events are durable.
        self.append(events, self._episode_logger(run, committed))
        plan.record_done(b, j, record)
        bar.update(1)
        bar.set_postfix(batch=f"{b + 1}/{len(plan.batches)}", accepted=plan.totals()[0])

    def batch_done(self, batch_index: int) -> None:
        self.batch_index, self.episode_index = batch_index, None
        if not self._todo[batch_index]:
            # Every episode was done before the crash; only the batch end is missing.
            self.phase = "finish_batch"
            self.append([self._batch_finished(batch_index, extra=None)])
        self.update_datasets()

    def update_datasets(self) -> None:
        """Ask the live datasets to project the log as it will be once everything submitted so
        far is appended (they build on their own thread; see runtime.export.live)."""
        if self.datasets:
            self.datasets.request(self.writer.version)

    def finish_datasets(self) -> None:
        """Wait for the last dataset build and append its `DatasetUpdated` (phase
        ``dataset``; a failure fails the run and resume retries it)."""
        if not self.datasets:
            return
        phase, self.phase = self.phase, "dataset"
        self.writer.drain()  # the log reaches what the last request waits for (or raises)
        self.update_datasets()
        ready = self.datasets.finish()
        if ready:
            self.append_now(ready)
        self.phase = phase

    def _record_unreset_episode(
        self, events: list[tuple[str, dict[str, Any]]], reset_error: BaseException
    ) -> None:
        """Queue a done episode whose reset failed: its trajectory is durable and its verdict
        known, so its events up to commit-or-discard go in (no ResetSubmitted, no
        BatchFinished: the episode stays open until a later session). The failure path that
        follows drains the writer before `RunFailed`, so they are logged ahead of it."""
        try:
            self.append(events)
        except BaseException as append_error:
            # An earlier append failed first; that error leads, the reset failure is a note.
            append_error.add_note(
                f"The environment reset after this episode also failed: "
                f"{type(reset_error).__name__}: {reset_error}"
            )
            raise

    def _batch_finished(
        self, batch_index: int, *, extra: EpisodeRecord | None
    ) -> tuple[str, dict[str, Any]]:
        """BatchFinished counted over the log's done episodes plus ``extra`` (being appended)."""
        accepted, attempted = self.plan.batch_counts(batch_index)
        if extra is not None:
            accepted, attempted = accepted + int(extra.accepted), attempted + 1
        return (
            "BatchFinished",
            {
                "batch_index": batch_index,
                "accepted": accepted,
                "attempted": attempted,
                "session_id": self.session.session_id,
                "worker": self._workers[batch_index],
            },
        )

    def _episode_logger(
        self, run: EpisodeRun, committed: dict[str, Any] | None
    ) -> Callable[[], None]:
        return lambda: self._log_episode(run, committed)

    def _log_episode(self, run: EpisodeRun, committed: dict[str, Any] | None) -> None:
        """The episode's log lines; run once its events are in the log (never before)."""
        judged = next(p for kind, p in run.events if kind == "EpisodeJudged")
        log.info(
            "episode_judged",
            run_id=self.run_id,
            batch_index=run.batch_index,
            episode_index=run.episode_index,
            accepted=run.accepted,
            reason=judged["reason"],
        )
        if committed is not None:
            log.info(
                "trajectory_committed",
                run_id=self.run_id,
                batch_index=run.batch_index,
                episode_index=run.episode_index,
                path=committed["path"],
                bytes=committed["bytes"],
                sha256=committed["sha256"],
            )

    # ------------------------------------------------------------------ endings

    def close_environment(self, *, then: list[tuple[str, dict[str, Any]]]) -> None:
        """Close once and record whether it worked, with ``then`` in the same append on
        success. A close failure is recorded and propagates (``then`` is not appended)."""
        self.phase = "close_environment"
        # Every episode is in the log before the environment is reported closed; an append
        # error raised here goes through the failure path (which closes the environment).
        self.writer.drain()
        if not self.executor.built:  # nothing was left to run in this session
            self.phase = "complete"
            self.append_now(then)
            return
        assert not self.deferred, "every batch ends with an append"
        try:
            self.executor.close()
        except BaseException as error:
            self.append_now([self._closed_event(error)])
            raise
        self.phase = "complete"
        self.append_now([self._closed_event(None), *then])

    def _closed_event(self, error: BaseException | None) -> tuple[str, dict[str, Any]]:
        return (
            "EnvironmentClosed",
            {
                "session_id": self.session.session_id,
                "ok": error is None,
                "error_type": None if error is None else type(error).__name__,
                "detail": None if error is None else str(error),
            },
        )

    def fail(self, error: BaseException) -> None:
        """Close the environment, append `RunFailed`; attach any secondary failure as a note."""
        self._settle_writer(error)
        can_append = not isinstance(error, SessionLost) and self.session.lost is None
        if self.executor.built:
            close_error: BaseException | None = None
            try:
                self.executor.close()
            except BaseException as exc:
                close_error = exc
                error.add_note(
                    f"Environment close also failed: {type(exc).__name__}: {exc}"
                )
            if can_append:
                closed = self._closed_event(close_error)
                self._append_secondary(error, [closed], "EnvironmentClosed")
        if not can_append:
            return
        failed = run_failed_payload(
            self.phase, error, batch_index=self.batch_index, episode_index=self.episode_index
        )
        if self._append_secondary(error, [("RunFailed", failed)], "RunFailed"):
            mark_recorded(error, self.run_id)
        log.error(
            "collection_failed",
            run_id=self.run_id,
            phase=self.phase,
            error_type=type(error).__name__,
            detail=str(error),
            batch_index=self.batch_index,
            episode_index=self.episode_index,
        )

    def _settle_writer(self, error: BaseException) -> None:
        """Let the writer finish what was queued before the failure is recorded.

        If the failure *is* a writer error, `RunFailed` names the job that was refused (its
        phase, batch and episode), not the episode that happened to be running when it
        surfaced. A writer error behind another failure becomes a note on it."""
        self.writer.settle()
        pending, tag = self.writer.pending_error, self.writer.error_tag
        if pending is error and tag is not None:
            self.phase, self.batch_index, self.episode_index = (
                tag.phase, tag.batch_index, tag.episode_index
            )
        elif pending is not None:
            error.add_note(
                f"Appending collection events also failed: {type(pending).__name__}: {pending}"
            )

    def _append_secondary(
        self, error: BaseException, events: list[tuple[str, dict[str, Any]]], what: str
    ) -> bool:
        """Append ``events`` after ``error``; whether they were recorded (else a note)."""
        try:
            # The writer is settled; an interrupted append may or may not have committed:
            # re-read the version and continue from it.
            self.writer.settle()
            self.writer.reset_version(self.store.state(self.run_id).version)
            try:
                self.append_now(events)
            except Exception:
                if not self.deferred:
                    raise
                self.deferred = []  # the deferred events may be what was refused
                self.writer.reset_version(self.store.state(self.run_id).version)
                self.append_now(events)
        except BaseException as exc:
            error.add_note(f"Recording {what} also failed: {type(exc).__name__}: {exc}")
            return False
        return True


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
        driver.writer.close()
        driver.executor.shutdown()
        if live is not None:
            live.close()
    report = write_report(store, run_id, path, session)
    return result_from_report(run_id, report, path, unlogged)


def end_session(session: CollectorSession, error: BaseException | None) -> None:
    """Release the lease; a failure to do so is a note on ``error`` (or raised if none)."""
    try:
        session.close()
    except BaseException as release_error:
        if error is None:
            raise
        error.add_note(f"Releasing the run lease also failed: {release_error}")


def collect(
    run_id: str,
    *,
    store: Any,
    initial_checks: Sequence[CheckSpec] | None = None,
    final_checks: Sequence[CheckSpec] | None = None,
    environment_factory: EnvironmentFactory | None = None,
    episodes_per_batch: int | None = None,
    progress: bool = True,
    datasets: Sequence[Any] = (),
    workers: int = 1,
    ray_address: str | None = None,
    keep_rejected: bool = False,
    episode_deadline_s: float | None = None,
) -> CollectionResult:
    """Collect a prepared run: every batch, `episodes_per_batch` episodes each.

    ``keep_rejected``: a rejected episode's recorded trajectory (and camera files) is kept
    under ``rejected/run_<session>/`` and listed in its `TrajectoryDiscarded` (``kept``).

    The lease is taken first, so a second `collect`/`resume` of the same run while this one
    is alive is refused with ``LeaseHeld`` naming this session. An interrupted or failed
    collection is continued with ``runtime.resume.resume``, never with ``collect``.
    A run whose hash chain does not verify (the cheap check from its anchor,
    ``store.require_intact_chain``) is refused with ``ChainBroken`` before the lease is
    taken, so nothing (not even a ``LeaseTakenOver``) is appended to an altered log.

    ``environment_factory(deployment_dir, *, seed, settle_steps)`` replaces the MuJoCo
    environment; what it returns must offer ``reset(seed | None)``, ``replace_assets``,
    ``run_checks``, ``run_program`` and ``close`` (see ``EnvironmentFactory``).
    ``workers`` > 1 runs on a local Ray instance, ``ray_address`` on an existing cluster.
    """
    # exit 2 records nothing
    options = ExecutorOptions(workers, ray_address, episode_deadline_s).check()
    store.require_intact_chain(run_id)
    with options.connected():  # Ray up before the lease: unreachable is exit 2 too
        return _collect_prepared(
            run_id,
            store=store,
            initial_checks=initial_checks,
            final_checks=final_checks,
            environment_factory=environment_factory,
            episodes_per_batch=episodes_per_batch,
            progress=progress,
            datasets=datasets,
            workers=workers,
            ray_address=ray_address,
            keep_rejected=keep_rejected,
            episode_deadline_s=episode_deadline_s,
        )


def _collect_prepared(run_id: str, *, store: Any, **collect_kwargs: Any) -> CollectionResult:
    session = CollectorSession.open(store, run_id)
    try:
        state = store.state(run_id)
        if state.state != "prepared":
            hint = (
                "use resume to continue it"
                if state.state in ("collecting", "failed", "preparing")
                else "there is nothing left to collect"
            )
            raise CollectionRefused(f"run {run_id} is {state.state}, not prepared; {hint}")
        result = run_collection(run_id, store=store, session=session, **collect_kwargs)
    except BaseException as error:
        end_session(session, error)
        raise
    end_session(session, None)
    return result
