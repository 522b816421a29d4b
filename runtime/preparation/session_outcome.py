"""Running a preparation job to its end, whatever the end is.

Success writes the preparation report. Any failure (including Ctrl-C) first appends
``RunFailed`` and writes the failed report, so the log tells what happened even though the
error still propagates; problems while recording it become notes on the original error,
which keeps its identity. The lease is released either way. A session that lost its lease
(``SessionLost``) records and writes nothing: the run belongs to another session now.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from domain.errors import SessionLost, mark_recorded
from runtime.deployment import Deployment
from runtime.files import report_text, write_bytes_atomic
from runtime.preparation.batch_job import PreparationJob
from runtime.preparation.errors import PreparationFailed
from runtime.preparation.ledger import Ledger
from runtime.session import run_failed_payload
from store.gc_pause import gc_paused

log = structlog.get_logger(__name__)

REPORT_NAME = "preparation.report.json"
PHASE = "preparing"  # the run state preparation owns; RunFailed.phase and resume use it


@dataclass(frozen=True)
class PreparationResult:
    run_id: str
    deployments: tuple[Deployment, ...]
    report_path: Path


def report_text_of(store: Any, run_id: str) -> str:
    """The report's exact text, from the store's snapshotted ``preparation_report`` + the
    tail: what :func:`write_report` publishes and what a stale file is compared with."""
    with gc_paused():
        return report_text(store.project(run_id, "preparation_report").report())


def write_report(store: Any, run_id: str, output: Path, fence: Any | None = None) -> Path:
    """Write the report from the log (:func:`report_text_of`)."""
    path = output / REPORT_NAME
    write_bytes_atomic(path, report_text_of(store, run_id).encode("utf-8"), fence=fence)
    return path


def record_failure(ledger: Ledger, output: Path, error: BaseException) -> None:
    """Append ``RunFailed`` and write the failed report; secondary failures become notes."""
    if isinstance(error, SessionLost):
        log.error("prepare.session_lost", run_id=ledger.run_id, detail=str(error))
        return
    cause = error.__cause__ if isinstance(error, PreparationFailed) else error
    assert cause is not None
    # RunCreated is in the log whatever happens next: this is the run's failure (exit 1).
    mark_recorded(error, ledger.run_id)
    try:
        ledger.emit("RunFailed", run_failed_payload(PHASE, error, cause=cause))
    except Exception as secondary:
        error.add_note(f"recording RunFailed failed: {type(secondary).__name__}: {secondary}")
    try:
        write_report(ledger.store, ledger.run_id, output, ledger.fence)
    except Exception as secondary:
        error.add_note(f"writing {REPORT_NAME} failed: {type(secondary).__name__}: {secondary}")


def drive(job: PreparationJob) -> PreparationResult:
    """Run ``job``; return its deployments, or record the failure and re-raise it."""
    try:
        deployments = job.run()
        report_path = write_report(
            job.ledger.store, job.ledger.run_id, job.output, job.ledger.fence
        )
    except BaseException as error:
        record_failure(job.ledger, job.output, error)
        raise
    finally:
        try:
            job.ledger.release()
        except Exception as error:  # the run's outcome is already in the log
            log.warning("prepare.lease_release_failed", error=str(error))
    log.info("prepare.done", run_id=job.ledger.run_id, batches=len(deployments))
    return PreparationResult(job.ledger.run_id, deployments, report_path)
