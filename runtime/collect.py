"""Collection: run every prepared batch on ONE environment and record it all in the ledger.

The environment is built for the first batch this session has to do and reused: per batch
only the role bodies are replaced. Every episode resets with its derived seed
(:func:`runtime.seeds.episode_seed`), settles, runs the initial checks (which gate
execution), the program, the measured checks (which gate acceptance), commits or discards
its trajectory, and then asks the environment to return to its nominal state
(``env.reset(None)``; `ResetSubmitted` is logged only once that call returned). The
episode's events go into the log in one append *after* the trajectory file is durable, so
the log never claims a file that is not on disk, and a crash at any instant leaves either
the whole episode or nothing of it in the log.

Appends are pipelined: a single writer thread (:mod:`runtime.collect_support.ledger`)
appends episode N's transaction while episode N+1 runs, in order. The writer is drained
before the environment is reported closed, before `RunFailed`, and wherever the collector
needs the run's version, and an append error is raised (the same object) in this thread at
the next submission or drain. A SIGKILL can therefore lose the last episode or two: their
files may be on disk unlogged, which resume moves to quarantine and re-runs.

The same code serves a first collection and a resumed one: the plan is read from the log,
done episodes (commit-or-discard logged) are skipped, and the rest are run from their start.
On any exception, KeyboardInterrupt included, the environment is still closed, the failure
(phase, position, traceback) is appended as `RunFailed`, `report.json` is written, and the
original exception propagates with its identity; secondary failures become notes on it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from domain.errors import AssetcastError, mark_recorded
from domain.task import CheckSpec
from runtime.collect_support.episode import EpisodeContext, run_episode
from runtime.collect_support.ledger import LedgerWriter, Tag
from runtime.collect_support.plan import (
    BatchPlan,
    CollectionPlan,
    CollectionRefused,
    EpisodeRecord,
    read_plan,
)
from runtime.collect_support.recordings import (
    quarantine_unlogged,
    session_recording_dir,
    to_log_path,
    verify_committed,
)
from runtime.files import write_json_atomic
from runtime.session import CollectorSession, SessionLost, run_failed_payload
from store.projections.collection_report import collection_report

log = structlog.get_logger(__name__)

REPORT_NAME = "report.json"
# Jobs the ledger writer may hold besides the one it is writing (see collect_support.ledger):
# a SIGKILL loses at most this many + 1 episodes' events. 0 appends synchronously, which
# bench/bench_collect.py uses to measure what the pipeline saves.
LEDGER_PIPELINE_DEPTH = 1
EnvironmentFactory = Callable[..., Any]
"""``factory(deployment_dir, *, seed, settle_steps) -> environment``. The environment must
provide ``reset(seed: int | None)`` (an int: the episode's deterministic start; None: return
to the nominal state after an episode, no noise, no settling), ``replace_assets(deployment_dir)``
returning an object with ``roles_replaced`` and ``entities_kept``, ``run_checks(specs)``,
``run_program(recorder)`` and ``close()``; ``constructions`` is optional."""


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


def default_environment_factory(deployment_dir: Path, *, seed: int, settle_steps: int) -> Any:
    """The MuJoCo TaskEnvironment. ``seed`` is unused: every episode resets with its own."""
    from runtime.sim import TaskEnvironment

    del seed
    return TaskEnvironment.from_deployment(deployment_dir, settle_steps=settle_steps)


def _check_specs(value: Sequence[CheckSpec] | None, name: str) -> tuple[CheckSpec, ...] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise CollectionRefused(f"{name} must be a sequence of CheckSpec")
    items = tuple(value)
    for index, item in enumerate(items):
        if not isinstance(item, CheckSpec):
            raise CollectionRefused(
                f"{name}[{index}] must be a CheckSpec, got {type(item).__name__}"
            )
    return items


def report_path_of(plan: CollectionPlan) -> Path:
    return plan.output_dir / REPORT_NAME


def write_report(
    store: Any, run_id: str, path: Path, fence: Any | None = None
) -> dict[str, Any]:
    """Write `report.json` from the log (the same projection `show --json` prints);
    ``fence`` (the session) is checked right before it is published."""
    report = collection_report(store.read(run_id))
    write_json_atomic(path, report, fence=fence)
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


def _progress_bar(plan: CollectionPlan, enabled: bool) -> Any:
    from tqdm import tqdm

    total = len(plan.batches) * plan.episodes_per_batch
    accepted, attempted = plan.totals()
    bar = tqdm(
        total=total,
        initial=attempted,
        unit="ep",
        desc=f"collect {plan.run_id}",
        file=sys.stderr,
        disable=not enabled or not sys.stderr.isatty(),
        dynamic_ncols=True,
    )
    bar.set_postfix(batch=f"-/{len(plan.batches)}", accepted=accepted, refresh=False)
    return bar


class _Collector:
    """One session's pass over the plan; owns the environment and the ledger writer (which
    tracks the run's version)."""

    def __init__(
        self,
        store: Any,
        session: CollectorSession,
        plan: CollectionPlan,
        version: int,
        *,
        initial_checks: tuple[CheckSpec, ...] | None,
        final_checks: tuple[CheckSpec, ...] | None,
        factory: EnvironmentFactory,
        progress: bool,
        datasets: Any = None,
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
        self.initial_checks = initial_checks
        self.final_checks = final_checks
        self.factory = factory
        self.progress = progress
        self.env: Any = None
        self.cameras: Any = None  # runtime.sim.cameras.CameraRig, built with the first batch
        self.deferred: list[tuple[str, dict[str, Any]]] = []
        self.phase = "start"
        self.batch_index: int | None = None
        self.episode_index: int | None = None
        self.recording_dir = (
            session_recording_dir(plan.output_dir, session.session_id)
            if plan.record_trajectory
            else None
        )

    # ------------------------------------------------------------------ ledger

    def append(
        self, events: Sequence[tuple[str, dict[str, Any]]],
        on_durable: Callable[[], None] | None = None,
    ) -> None:
        """Submit ``events`` (after any deferred ones) as one transaction to the writer.

        The append itself happens on the writer thread while the caller goes on; an earlier
        append's error is raised here (see :mod:`runtime.collect_support.ledger`).
        ``on_durable`` runs once the transaction is committed.
        """
        self.session.raise_if_lost()
        ready = self.datasets.take_events() if self.datasets else []
        batch = [*self.deferred, *ready, *events]
        self.writer.submit(
            batch, Tag(self.phase, self.batch_index, self.episode_index), on_durable
        )
        self.deferred = []

    def append_now(self, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Append and wait until it (and everything before it) is in the log."""
        self.append(events)
        self.writer.drain()

    def defer(self, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
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
        bar = _progress_bar(plan, self.progress)
        try:
            for position, batch in enumerate(pending):
                self.run_batch(batch, build=position == 0, bar=bar)
        finally:
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

    def run_batch(self, batch: BatchPlan, *, build: bool, bar: Any) -> None:
        from runtime.deployment import validate_deployment
        from runtime.taskfile import load_task

        plan = self.plan
        self.batch_index, self.episode_index = batch.batch_index, None
        self.phase = "validate_deployment"
        deployment = validate_deployment(
            batch.deployment_path, expected_manifest_sha256=batch.manifest_sha256
        )
        task = load_task(deployment.task_path)
        opening: list[tuple[str, dict[str, Any]]] = []
        if build:
            self.phase = "build_environment"
            self.env = self.factory(
                batch.deployment_path, seed=batch.seed, settle_steps=plan.settle_steps
            )
            opening.append(
                (
                    "EnvironmentBuilt",
                    {
                        "session_id": self.session.session_id,
                        "batch_index": batch.batch_index,
                        "constructions": int(getattr(self.env, "constructions", 1)),
                    },
                )
            )
            # Built from this very deployment: no role body was swapped.
            roles_replaced: list[str] = []
            entities_kept = [e.entity_id for e in task.scene.entities]
        else:
            self.phase = "replace_assets"
            info = self.env.replace_assets(batch.deployment_path)
            roles_replaced = list(info.roles_replaced)
            entities_kept = list(info.entities_kept)
        done_before = plan.batch_counts(batch.batch_index)[1]
        self.defer(
            [
                *opening,
                (
                    "BatchStarted",
                    {
                        "batch_index": batch.batch_index,
                        "asset_set_id": batch.asset_set_id,
                        "seed": batch.seed,
                        "deployment_path": str(deployment.path),
                    },
                ),
                (
                    "AssetsReplaced",
                    {
                        "batch_index": batch.batch_index,
                        "roles_replaced": roles_replaced,
                        "entities_kept": entities_kept,
                    },
                ),
            ]
        )
        log.info(
            "batch_started",
            run_id=self.run_id,
            batch_index=batch.batch_index,
            asset_set_id=batch.asset_set_id,
            seed=batch.seed,
            roles_replaced=roles_replaced,
            episodes_already_done=done_before,
        )
        initial = self.initial_checks if self.initial_checks is not None else task.checks.initial
        final = self.final_checks if self.final_checks is not None else task.checks.final
        ctx = EpisodeContext(
            batch_index=batch.batch_index,
            batch_seed=batch.seed,
            asset_set_id=batch.asset_set_id,
            manifest_sha256=deployment.manifest_sha256,
            manifest_roles=dict(deployment.manifest.get("roles", {})),
            output_dir=plan.output_dir,
            recording_dir=self.recording_dir,
            fence=self.session,
            cameras=self.camera_rig(task),
        )
        bar.set_postfix(
            batch=f"{batch.batch_index + 1}/{len(plan.batches)}",
            accepted=plan.totals()[0],
        )
        self.phase = "episode"
        todo = [
            j for j in range(plan.episodes_per_batch) if not plan.is_done(batch.batch_index, j)
        ]
        for episode_index in todo:
            self.episode_index = episode_index
            outcome = run_episode(
                self.env, ctx, episode_index, initial_checks=initial, final_checks=final
            )
            record = EpisodeRecord(outcome.accepted, outcome.committed, outcome.reset_error is None)
            events = list(outcome.events)
            if outcome.reset_error is not None:
                self._record_unreset_episode(events, outcome.reset_error)
                raise outcome.reset_error
            if episode_index == todo[-1]:
                # The batch's last episode and BatchFinished share one transaction.
                events.append(self._batch_finished(batch.batch_index, extra=record))
            # Queued: the writer appends it while the next episode runs; the episode's log
            # lines are emitted only once its events are durable.
            self.append(events, self._episode_logger(batch.batch_index, episode_index, outcome))
            plan.record_done(batch.batch_index, episode_index, record)
            bar.update(1)
            bar.set_postfix(
                batch=f"{batch.batch_index + 1}/{len(plan.batches)}",
                accepted=plan.totals()[0],
            )
        self.episode_index = None
        if not todo:  # every episode was done before the crash; only the batch end is missing
            self.phase = "finish_batch"
            self.append([self._batch_finished(batch.batch_index, extra=None)])
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

    def camera_rig(self, task: Any) -> Any:
        """The session's camera rig (None when not recording or the task has no cameras)."""
        if self.recording_dir is None or not task.cameras:
            return None
        if self.cameras is None:
            from runtime.sim.cameras import CameraRig

            self.cameras = CameraRig(task.cameras)
        return self.cameras

    def close_cameras(self) -> None:
        """Free the renderers' GL contexts (before the model they draw goes away)."""
        if self.cameras is not None:
            cameras, self.cameras = self.cameras, None
            cameras.close()

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
            {"batch_index": batch_index, "accepted": accepted, "attempted": attempted},
        )

    def _episode_logger(
        self, batch_index: int, episode_index: int, outcome: Any
    ) -> Callable[[], None]:
        return lambda: self._log_episode(batch_index, episode_index, outcome)

    def _log_episode(self, batch_index: int, episode_index: int, outcome: Any) -> None:
        """The episode's log lines; run once its events are in the log (never before)."""
        judged = next(p for kind, p in outcome.events if kind == "EpisodeJudged")
        log.info(
            "episode_judged",
            run_id=self.run_id,
            batch_index=batch_index,
            episode_index=episode_index,
            accepted=outcome.accepted,
            reason=judged["reason"],
        )
        if outcome.committed is not None:
            log.info(
                "trajectory_committed",
                run_id=self.run_id,
                batch_index=batch_index,
                episode_index=episode_index,
                path=outcome.committed["path"],
                bytes=outcome.committed["bytes"],
                sha256=outcome.committed["sha256"],
            )

    # ------------------------------------------------------------------ endings

    def close_environment(self, *, then: list[tuple[str, dict[str, Any]]]) -> None:
        """Close once and record whether it worked, with ``then`` in the same append on
        success. A close failure is recorded and propagates (``then`` is not appended)."""
        self.phase = "close_environment"
        # Every episode is in the log before the environment is reported closed; an append
        # error raised here goes through the failure path (which closes the environment).
        self.writer.drain()
        if self.env is None:  # nothing was left to run in this session
            self.phase = "complete"
            self.append_now(then)
            return
        assert not self.deferred, "every batch ends with an append"
        env, self.env = self.env, None
        try:
            self.close_cameras()
            env.close()
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
        if self.env is not None:
            env, self.env = self.env, None
            close_error: BaseException | None = None
            try:
                self.close_cameras()
                env.close()
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


def refuse_bad_collection_input(
    plan: CollectionPlan,
    initial_checks: Sequence[CheckSpec] | None,
    final_checks: Sequence[CheckSpec] | None,
    environment_factory: EnvironmentFactory | None,
) -> tuple[tuple[CheckSpec, ...] | None, tuple[CheckSpec, ...] | None, EnvironmentFactory]:
    """Every bad-input refusal of a collection (exit 2), so that a caller about to record
    something (``resume`` appending ``RunResumed``) can make them all first."""
    initial = _check_specs(initial_checks, "initial_checks")
    final = _check_specs(final_checks, "final_checks")
    factory = environment_factory or default_environment_factory
    if not callable(factory):
        raise CollectionRefused("environment_factory must be callable")
    if environment_factory is None:
        _require_registered(plan, initial, final)
        _check_cameras(plan)
    return initial, final, factory


def _require_registered(
    plan: CollectionPlan,
    initial: tuple[CheckSpec, ...] | None,
    final: tuple[CheckSpec, ...] | None,
) -> None:
    """Refuse, before any event, a task naming checks or skills this process lacks."""
    pending = plan.pending_batches()
    if not pending:
        return
    from runtime.sim.registry import unregistered_message, unregistered_names
    from runtime.taskfile import load_task

    task = load_task(pending[0].deployment_path / "task.yaml")
    missing = unregistered_names(task, initial, final)
    if missing:
        raise CollectionRefused(f"run {plan.run_id}: {unregistered_message(missing)}")


def _check_cameras(plan: CollectionPlan) -> None:
    """Refuse, before any event, cameras that cannot record (see check_task_cameras)."""
    pending = plan.pending_batches()
    if not pending or not plan.record_trajectory:
        return
    from runtime.taskfile import load_task

    path = pending[0].deployment_path
    task = load_task(path / "task.yaml")
    if task.cameras:
        from runtime.sim.cameras.rig import check_task_cameras

        check_task_cameras(task, path)


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
    known_events: Sequence[Any] = (),
    datasets: Sequence[Any] = (),
) -> CollectionResult:
    """Collect (or continue collecting) ``run_id`` under an already-held ``session``.

    Used by :func:`collect` for a prepared run and by ``resume`` for an interrupted one.
    Committed trajectories are verified against disk first unless the caller did so;
    ``known_events`` (a prefix of the log the caller already read) saves re-reading it.
    """
    events = list(known_events)
    events += store.read(run_id, after_seq=events[-1].seq if events else 0)
    plan = read_plan(run_id, events, episodes_per_batch=episodes_per_batch)
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
    collector = _Collector(
        store,
        session,
        plan,
        events[-1].seq,
        initial_checks=initial,
        final_checks=final,
        factory=factory,
        progress=progress,
        datasets=live,
    )
    path = report_path_of(plan)
    try:
        try:
            collector.run()
        except BaseException as error:
            collector.fail(error)
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
        collector.writer.close()
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
) -> CollectionResult:
    """Collect a prepared run: every batch, `episodes_per_batch` episodes each.

    The lease is taken first, so a second `collect`/`resume` of the same run while this one
    is alive is refused with ``LeaseHeld`` naming this session. An interrupted or failed
    collection is continued with ``runtime.resume.resume``, never with ``collect``.

    ``environment_factory(deployment_dir, *, seed, settle_steps)`` replaces the MuJoCo
    environment; what it returns must offer ``reset(seed | None)``, ``replace_assets``,
    ``run_checks``, ``run_program`` and ``close`` (see ``EnvironmentFactory``).
    """
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
        result = run_collection(
            run_id,
            store=store,
            session=session,
            initial_checks=initial_checks,
            final_checks=final_checks,
            environment_factory=environment_factory,
            episodes_per_batch=episodes_per_batch,
            progress=progress,
            datasets=datasets,
        )
    except BaseException as error:
        end_session(session, error)
        raise
    end_session(session, None)
    return result


__all__ = [
    "AssetcastError",
    "BatchOutcome",
    "CollectionRefused",
    "CollectionResult",
    "EpisodeOutcome",
    "collect",
    "default_environment_factory",
    "run_collection",
]
