"""The collector's ledger writer: appends on a background thread while the next episode runs.

A durable append (SQLite, ``synchronous=FULL``) costs an fsync, about a millisecond, and a
collection makes one per episode. Instead of stalling the simulator for it, the collector
hands each episode's events to ONE writer thread and goes on with the next episode. What
stays true:

* **Order.** One thread, one FIFO queue: transactions reach the store in submission order,
  each with the expected version the collector computed for it, so a reordering (or anyone
  else writing to the run) is refused by the store's optimistic check.
* **One transaction per submission.** Jobs are never merged or split.
* **Files before facts.** The collector submits an episode's events only after its
  trajectory file was fsynced, so the log still never names a file that is not on disk.
* **Facts before claims.** What a job says happened (the ``trajectory_committed`` log line)
  is emitted by its ``on_durable`` callback, after the append committed, never before.
* **Fenced.** Every append carries the session's lease (``fence``), checked by the store in
  the append's own transaction: a session that was taken over appends nothing.
* **Bounded loss.** The queue holds at most ``depth`` jobs besides the one being written; a
  SIGKILL loses at most those episodes' events (their files may be on disk unlogged, which
  resume already reports, ignores and re-runs).
* **Errors keep their identity.** The first append error stops the writer (later jobs are
  dropped: their expected versions no longer hold) and is raised, as the same object, in
  the collector's thread at its next :meth:`LedgerWriter.submit` or :meth:`drain`, so it
  goes through the ordinary failure path (`RunFailed`).

``depth=0`` appends synchronously in the caller's thread (same interface, no thread); the
benchmark uses it to measure what the pipeline saves.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from store.records import NewEvent

log = structlog.get_logger(__name__)

Events = Sequence[tuple[str, dict[str, Any]]]


@dataclass(frozen=True)
class Tag:
    """Where in the collection a job comes from, so a failure can be placed precisely."""

    phase: str
    batch_index: int | None
    episode_index: int | None


@dataclass(frozen=True)
class _Job:
    events: tuple[NewEvent, ...]
    expected_version: int
    tag: Tag
    on_durable: Callable[[], None] | None = None


class LedgerWriter:
    """Appends a run's collection events in order, at most ``depth`` jobs behind the caller.

    ``before_append`` runs (in the writing thread) right before each store append (the
    collector passes its local lost-lease check, to stop early); ``fence`` (the session's
    lease) goes with every append, which the store refuses unless it still holds the run.
    """

    def __init__(
        self,
        store: Any,
        run_id: str,
        version: int,
        *,
        before_append: Callable[[], None] = lambda: None,
        fence: Any = None,
        depth: int = 1,
    ) -> None:
        if depth < 0:
            raise ValueError("depth must be >= 0")
        self.store = store
        self.run_id = run_id
        self.before_append = before_append
        self.fence = fence
        self.depth = depth
        self._submitted_version = version
        self._error: BaseException | None = None
        self._error_tag: Tag | None = None
        self._queue: queue.Queue[_Job | None] | None = None
        self._thread: threading.Thread | None = None
        if depth:
            self._queue = queue.Queue(maxsize=depth)
            self._thread = threading.Thread(
                target=self._loop, name=f"assetcast-ledger-{run_id}", daemon=True
            )
            self._thread.start()

    # ------------------------------------------------------------------ caller side

    @property
    def version(self) -> int:
        """The run's version once every submitted job is appended (valid after a drain)."""
        return self._submitted_version

    @property
    def error_tag(self) -> Tag | None:
        """Where the job that failed came from (None while nothing failed)."""
        return self._error_tag

    @property
    def pending_error(self) -> BaseException | None:
        """The append error that stopped the writer, until :meth:`reset_version`."""
        return self._error

    def submit(
        self, events: Events, tag: Tag, on_durable: Callable[[], None] | None = None
    ) -> None:
        """Queue ``events`` as one transaction (blocks while the queue is full);
        ``on_durable`` runs once they are committed (never if the append fails).

        Raises a pending append error first, so a failure surfaces at the next episode.
        """
        self._raise_pending()
        job = _Job(
            tuple(NewEvent(kind, payload) for kind, payload in events),
            self._submitted_version,
            tag,
            on_durable,
        )
        self._submitted_version += len(job.events)
        if self._queue is None:
            self._write(job)
            self._raise_pending()
            return
        if self._thread is None:
            raise RuntimeError("the ledger writer is closed")
        self._queue.put(job)

    def drain(self) -> int:
        """Wait until every submitted job is appended; raise the first append error."""
        self.settle()
        self._raise_pending()
        return self._submitted_version

    def settle(self) -> None:
        """Wait for the queue to empty without raising (failure paths use this)."""
        if self._queue is not None and self._thread is not None:
            self._queue.join()

    def close(self) -> None:
        """Finish queued work and stop the thread (idempotent; never raises an append error)."""
        if self._queue is None or self._thread is None:
            return
        thread, self._thread = self._thread, None
        self._queue.put(None)
        thread.join()

    def reset_version(self, version: int) -> None:
        """Continue from ``version`` (re-read from the store) after a failure, synchronously."""
        self._submitted_version = version
        self._error = None
        self._error_tag = None

    # ------------------------------------------------------------------ writer side

    def _raise_pending(self) -> None:
        if self._error is not None:
            raise self._error

    def _write(self, job: _Job) -> None:
        if self._error is not None:  # an earlier job failed: this one's version is stale
            return
        try:
            self.before_append()
            self.store.append(
                self.run_id, job.events, expected_version=job.expected_version, fence=self.fence
            )
        except BaseException as error:
            tag = job.tag
            where = f"phase {tag.phase}"
            if tag.batch_index is not None:
                where += f", batch {tag.batch_index}"
            if tag.episode_index is not None:
                where += f", episode {tag.episode_index}"
            if self._queue is not None:
                error.add_note(
                    f"Raised by the background ledger writer while appending "
                    f"{len(job.events)} events ({where})."
                )
            self._error_tag = tag
            self._error = error
            log.error(
                "ledger_append_failed",
                run_id=self.run_id,
                phase=tag.phase,
                batch_index=tag.batch_index,
                episode_index=tag.episode_index,
                error_type=type(error).__name__,
                detail=str(error),
            )
            return
        if job.on_durable is not None:
            try:
                job.on_durable()
            except Exception as error:  # a log line must not stop the ledger  # noqa: BLE001
                log.warning("ledger_on_durable_failed", run_id=self.run_id, error=str(error))

    def _loop(self) -> None:
        assert self._queue is not None
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                self._write(job)
            except BaseException as error:  # never die with jobs queued: drain would hang
                if self._error is None:
                    self._error, self._error_tag = error, job.tag
            finally:
                self._queue.task_done()
