"""The collecting session's front to the log: every event the driver records goes through here.

It wraps the pipelined :class:`~runtime.collection.ledger.LedgerWriter` (fenced by the
session's lease, refused once the session is lost) with what the driver adds around it:

* **Position.** ``phase``/``batch_index``/``episode_index`` say where the collection is;
  each submission is tagged with them, so a failure, even one raised later by the writer
  thread, is recorded as `RunFailed` at the place it belongs.
* **Deferred events.** A batch's opening events ride along with its first episode's append
  (each durable commit costs an fsync).
* **Live datasets.** Their `DatasetUpdated` events ride along too, and they are asked to
  build whenever the log gained a batch (the dataset-update hook).
* **Appends after a failure.** The writer is settled and its version re-read before
  `EnvironmentClosed`/`RunFailed` are appended, since an interrupted append may or may not
  have committed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runtime.collection.ledger import LedgerWriter, Tag
from runtime.session import CollectorSession

# Jobs the ledger writer may hold besides the one it is writing (see collection.ledger):
# a SIGKILL loses at most this many + 1 episodes' events. 0 appends synchronously, which
# bench/bench_collect.py uses to measure what the pipeline saves.
LEDGER_PIPELINE_DEPTH = 1
Events = Sequence[tuple[str, dict[str, Any]]]


class SessionLedger:
    """One session's appends to ``run_id``, in order, tagged with where the collection is."""

    def __init__(
        self,
        store: Any,
        session: CollectorSession,
        run_id: str,
        version: int,
        *,
        datasets: Any = None,
    ) -> None:
        self.store = store
        self.session = session
        self.run_id = run_id
        self.datasets = datasets
        self.writer = LedgerWriter(
            store, run_id, version, before_append=session.raise_if_lost,
            fence=session.lease, depth=LEDGER_PIPELINE_DEPTH,
        )
        self.deferred: list[tuple[str, dict[str, Any]]] = []
        self.phase = "start"
        self.batch_index: int | None = None
        self.episode_index: int | None = None

    def at(self, phase: str, batch_index: int | None, episode_index: int | None) -> None:
        """Move the position the next submissions (and a failure) are tagged with."""
        self.phase, self.batch_index, self.episode_index = phase, batch_index, episode_index

    # ------------------------------------------------------------------ appends

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

    def drain(self) -> None:
        """Wait until everything submitted is in the log (an append error is raised here)."""
        self.writer.drain()

    # ------------------------------------------------------------------ live datasets

    def update_datasets(self, *, catch_up: bool = False) -> None:
        """Ask the live datasets to project the log as it will be once everything submitted so
        far is appended (they build on their own thread; see runtime.export.live).
        ``catch_up``: without waiting out their pacing (the session is about to end)."""
        if self.datasets:
            self.datasets.request(self.writer.version, catch_up=catch_up)

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

    # ------------------------------------------------------------------ after a failure

    def settle_for(self, error: BaseException) -> None:
        """Let the writer finish what was queued before the failure is recorded.

        If the failure *is* a writer error, the position becomes the job that was refused
        (its phase, batch and episode), not the episode that happened to be running when it
        surfaced. A writer error behind another failure becomes a note on it."""
        self.writer.settle()
        pending, tag = self.writer.pending_error, self.writer.error_tag
        if pending is error and tag is not None:
            self.at(tag.phase, tag.batch_index, tag.episode_index)
        elif pending is not None:
            error.add_note(
                f"Appending collection events also failed: {type(pending).__name__}: {pending}"
            )

    def append_secondary(
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

    def close(self) -> None:
        """Stop the writer thread (the session's pass is over, whichever way it ended)."""
        self.writer.close()
