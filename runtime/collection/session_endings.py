"""How a collecting session ends: the environment closed once, and the ending recorded.

On success the environment's `EnvironmentClosed` and the run's `RunCompleted` share one
append. On any failure (KeyboardInterrupt included) the environment is still closed, the
queued appends are settled, and `EnvironmentClosed` then `RunFailed` (phase, position,
traceback) are appended unless the lease is lost; every secondary failure becomes a note on
the original error, which keeps its identity.
"""

from __future__ import annotations

from typing import Any

import structlog

from domain.errors import mark_recorded
from runtime.collection.executors import Executor
from runtime.collection.session_events import environment_closed
from runtime.collection.session_ledger import SessionLedger
from runtime.session import SessionLost, run_failed_payload

log = structlog.get_logger(__name__)


def close_environment(
    ledger: SessionLedger, executor: Executor, *, then: list[tuple[str, dict[str, Any]]]
) -> None:
    """Close once and record whether it worked, with ``then`` in the same append on
    success. A close failure is recorded and propagates (``then`` is not appended)."""
    ledger.phase = "close_environment"
    # Every episode is in the log before the environment is reported closed; an append
    # error raised here goes through the failure path (which closes the environment).
    ledger.drain()
    if not executor.built:  # nothing was left to run in this session
        ledger.phase = "complete"
        ledger.append_now(then)
        return
    assert not ledger.deferred, "every batch ends with an append"
    session_id = ledger.session.session_id
    try:
        executor.close()
    except BaseException as error:
        ledger.append_now([environment_closed(session_id, error)])
        raise
    ledger.phase = "complete"
    ledger.append_now([environment_closed(session_id, None), *then])


def record_failure(ledger: SessionLedger, executor: Executor, error: BaseException) -> None:
    """Close the environment, append `RunFailed`; attach any secondary failure as a note."""
    ledger.settle_for(error)
    session = ledger.session
    can_append = not isinstance(error, SessionLost) and session.lost is None
    if executor.built:
        close_error: BaseException | None = None
        try:
            executor.close()
        except BaseException as exc:
            close_error = exc
            error.add_note(
                f"Environment close also failed: {type(exc).__name__}: {exc}"
            )
        if can_append:
            closed = environment_closed(session.session_id, close_error)
            ledger.append_secondary(error, [closed], "EnvironmentClosed")
    if not can_append:
        return
    failed = run_failed_payload(
        ledger.phase, error, batch_index=ledger.batch_index, episode_index=ledger.episode_index
    )
    if ledger.append_secondary(error, [("RunFailed", failed)], "RunFailed"):
        mark_recorded(error, ledger.run_id)
    log.error(
        "collection_failed",
        run_id=ledger.run_id,
        phase=ledger.phase,
        error_type=type(error).__name__,
        detail=str(error),
        batch_index=ledger.batch_index,
        episode_index=ledger.episode_index,
    )
