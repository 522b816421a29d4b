"""Collection's driver: the session's pass over the plan, turning executor reports into events.

The driver runs under the run's lease. It hands the batches still to do to an executor
(:mod:`runtime.collection.executors`), whose workers each build ONE environment and reuse it
across their batches (per batch only the role bodies are replaced). Every episode resets
with its derived seed (:func:`runtime.seeds.episode_seed`), settles, runs the initial checks
(which gate execution), the program, the measured checks (which gate acceptance), and asks
its environment to return to its nominal state (``env.reset(None)``; `ResetSubmitted` is
logged only once that call returned). The worker returns the episode's facts and its files'
bytes; the driver writes the files durably (:mod:`runtime.collection.commit`) and then
appends the episode's events in one transaction, so the log never claims a file that is not
on disk, and a crash at any instant leaves either the whole episode or nothing of it.

Appends are pipelined through the session's ledger (:mod:`runtime.collection.session_ledger`):
episode N's transaction is appended while episode N+1 runs, in order. A SIGKILL can
therefore lose the last episode or two: their files may be on disk unlogged, which resume
moves to quarantine and re-runs.

The same pass serves a first collection and a resumed one: the plan is read from the log,
done episodes (commit-or-discard logged) are skipped, and the rest are run from their start.
How the pass ends is :mod:`runtime.collection.session_endings`; the session around it is
:mod:`runtime.collection.session_run`.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import filterfalse
from typing import Any

import structlog

from runtime.collection.commit import episode_events
from runtime.collection.episode import EpisodeRun
from runtime.collection.episode_log import episode_logger
from runtime.collection.executors import (
    BatchDone,
    BatchOpened,
    BatchWork,
    EpisodeDone,
    Executor,
    Report,
)
from runtime.collection.plan import BatchPlan, CollectionPlan, EpisodeRecord
from runtime.collection.progress import progress_bar
from runtime.collection.recordings import session_recording_dir
from runtime.collection.session_endings import close_environment, record_failure
from runtime.collection.session_events import (
    batch_finished,
    batch_opening,
    collection_started,
    run_completed,
)
from runtime.collection.session_ledger import SessionLedger
from runtime.session import CollectorSession

log = structlog.get_logger(__name__)

REJECTED_DIR = "rejected"  # --keep-rejected: rejected episodes' files, by session


class Driver:
    """One session's pass over the plan; owns the executor and the session's ledger (which
    tracks the run's version and where the pass is)."""

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
        self.session = session
        self.plan = plan
        self.run_id = plan.run_id
        self.ledger = SessionLedger(store, session, plan.run_id, version, datasets=datasets)
        self.executor = executor
        self.progress = progress
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
        self._last_batch: int | None = None  # the pass's last pending batch

    # ------------------------------------------------------------------ the pass

    def run(self) -> None:
        plan, ledger = self.plan, self.ledger
        # Synchronous: a refusal (stale version, lost lease) stops us before the build.
        ledger.append_now([collection_started(self.session, plan, self.recording_dir)])
        # A crash may have cut a previous session between its last batch and the dataset
        # update that followed; bring the datasets up to date before anything new is done.
        ledger.update_datasets()
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
        self._last_batch = pending[-1].batch_index if pending else None
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
        ledger.batch_index = ledger.episode_index = None
        ledger.finish_datasets()
        # EnvironmentClosed and RunCompleted share one transaction (one fsync).
        close_environment(ledger, self.executor, then=[run_completed(plan)])
        accepted, attempted = plan.totals()
        log.info("collection_completed", run_id=self.run_id, accepted=accepted, attempted=attempted)

    def fail(self, error: BaseException) -> None:
        """Record ``error`` as the end of this pass (see session_endings.record_failure)."""
        record_failure(self.ledger, self.executor, error)

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
                    self.ledger.at(where.phase, where.batch_index, where.episode_index)
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

    # ------------------------------------------------------------------ reports

    def batch_opened(self, opened: BatchOpened, bar: Any) -> None:
        plan = self.plan
        b = opened.batch_index
        batch = next(x for x in plan.batches if x.batch_index == b)
        self.ledger.at(self.ledger.phase, b, None)
        self._workers[b] = opened.worker
        done_before = plan.batch_counts(b)[1]
        self.ledger.defer(batch_opening(self.session.session_id, batch, opened))
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
        self.ledger.phase = "episode"
        if b == self._last_batch:
            # What the datasets lag behind is built now, beside this batch, so the build
            # the session ends with holds this batch alone.
            self.ledger.update_datasets(catch_up=True)

    def episode_done(self, run: EpisodeRun, bar: Any) -> None:
        plan = self.plan
        b, j = run.batch_index, run.episode_index
        self.ledger.at("episode", b, j)
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
        self.ledger.append(events, episode_logger(self.run_id, run, committed))
        plan.record_done(b, j, record)
        bar.update(1)
        bar.set_postfix(batch=f"{b + 1}/{len(plan.batches)}", accepted=plan.totals()[0])

    def batch_done(self, batch_index: int) -> None:
        self.ledger.at(self.ledger.phase, batch_index, None)
        if not self._todo[batch_index]:
            # Every episode was done before the crash; only the batch end is missing.
            self.ledger.phase = "finish_batch"
            self.ledger.append([self._batch_finished(batch_index, extra=None)])
        self.ledger.update_datasets()

    def _record_unreset_episode(
        self, events: list[tuple[str, dict[str, Any]]], reset_error: BaseException
    ) -> None:
        """Queue a done episode whose reset failed: its trajectory is durable and its verdict
        known, so its events up to commit-or-discard go in (no ResetSubmitted, no
        BatchFinished: the episode stays open until a later session). The failure path that
        follows drains the writer before `RunFailed`, so they are logged ahead of it."""
        try:
            self.ledger.append(events)
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
        return batch_finished(
            batch_index, accepted=accepted, attempted=attempted,
            session_id=self.session.session_id, worker=self._workers[batch_index],
        )
