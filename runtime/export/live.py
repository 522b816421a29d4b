"""Live datasets: a collection session keeps its datasets up to date as batches finish.

The same code as `export` (:func:`runtime.export.dataset.build_version`) runs on the log as
it stands once the batch's events are appended, so a dataset never holds an episode the log
lacks. It runs beside the collection, overlapping the next batch's episodes: the collector
only says "the log will be at version V" (:meth:`LiveDatasets.request`); a background thread
hands V to the builder (:mod:`runtime.export.live_builders`: this process by default, or a
child process), which waits until the log reaches V, projects exactly the
events up to V and publishes (fenced by the session's lease), and the thread leaves a
`DatasetUpdated` for the collector to append with its next transaction, under the lease it
holds. Requests that pile up while a build runs, or within ``MIN_BUILD_INTERVAL_S`` of the
previous build, collapse into the latest one. Each update folds only the events appended since
the last one and reads only the first episode and the new ones. At the end of the session the
collector waits for the last build (:meth:`finish`), so the final dataset holds every committed
episode and equals what `export` writes from the finished log, byte for byte.

A SIGKILL at any moment leaves the previous complete version (or the new one) on disk; the
next session's first request brings it up to date and records it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.export.dataset import DatasetSpec
from runtime.export.live_builders import Built, open_builder

# While a build runs in this process (the thread builder), the interpreter hands the GIL
# over every 0.5 ms instead of every 5 ms. The collector thread lets go of the GIL many
# times per episode (MuJoCo steps, SQLite, fsync), and each time a busy build thread holds
# it until the switch interval forces a handover, so the collector waits up to that
# interval per release. Measured with bench/bench_live_dataset.py (robomimic,
# run-queue-corrected wall ratio): 1.15 at 5 ms, 1.02 at 0.5 ms.
_BUILD_SWITCH_INTERVAL_S = 0.0005
# A build starts no sooner than this after the previous one ended (the session's first one and
# the final one at `finish` start at once): batches that end meanwhile are built together.
# Every version costs a round of fsyncs, and on a journaling file system the collector's own
# fsyncs (trajectories, the log) wait behind them; with batches of a second or less, one
# version per batch would tie the collector to the dataset's disk traffic.
MIN_BUILD_INTERVAL_S = 1.0
# ... and no sooner than its own duration times (1 / MAX_BUILD_DUTY - 1): a build whose cost
# grows with the dataset (robomimic copies and re-hashes its one file) is kept to at most this
# share of the collection's wall time, whatever the dataset's size. On the collector's thread
# much of a build holds the GIL (h5py runs under its own lock with the GIL held), so its busy
# time is time the collector cannot run; in a child process it still takes a core's time and
# the disk's (2 cores, one ext4 journal for both processes' fsyncs), so both variants are
# paced alike. The dataset lags the log by at most that idle time, and `finish` brings it up
# to date at once.
MAX_BUILD_DUTY = 0.04


class _ShortSwitchInterval:
    """Lowers ``sys.setswitchinterval`` while any build of this process runs (never raises
    it: a lower value set by the application is kept) and restores it after the last one."""

    _lock = threading.Lock()
    _depth = 0
    _saved = 0.0

    def __enter__(self) -> None:
        with self._lock:
            cls = type(self)
            if cls._depth == 0:
                cls._saved = sys.getswitchinterval()
                if cls._saved > _BUILD_SWITCH_INTERVAL_S:
                    sys.setswitchinterval(_BUILD_SWITCH_INTERVAL_S)
            cls._depth += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            cls = type(self)
            cls._depth -= 1
            if cls._depth == 0 and cls._saved > _BUILD_SWITCH_INTERVAL_S:
                sys.setswitchinterval(cls._saved)


@dataclass(frozen=True)
class BuildRecord:
    """One finished build: the log version it projects and its cost (wall and CPU seconds,
    without the wait for the log), as the builder measured it."""

    version: int
    wall_s: float
    cpu_s: float


class LiveDatasets:
    """The datasets one collection session maintains for its run.

    ``builder``: ``"process"`` or ``"thread"`` (default: ``$ASSETCAST_LIVE_BUILDER``, else
    ``"thread"``; see :mod:`runtime.export.live_builders` for why). ``builds`` records every
    finished build (:class:`BuildRecord`), ``builder_kind`` says which variant ran them.
    """

    def __init__(
        self,
        run_id: str,
        specs: Sequence[DatasetSpec],
        store: Any,
        *,
        before_publish: Callable[[], None] = lambda: None,
        min_interval_s: float = MIN_BUILD_INTERVAL_S,
        max_duty: float = MAX_BUILD_DUTY,
        builder: str | None = None,
    ) -> None:
        if not 0 < max_duty <= 1:
            raise ValueError(f"max_duty must be in (0, 1], not {max_duty!r}")
        self.run_id = run_id
        self.min_interval_s = min_interval_s
        self.max_duty = max_duty
        self._idle_until = 0.0  # time.monotonic() before which no build starts (bar finish)
        self._flush = False
        self._catch_up = False
        self.specs = tuple(specs)
        self.builds: list[BuildRecord] = []
        self._lock = threading.Condition()
        self._wanted: int | None = None
        self._busy = False
        self._outbox: list[tuple[str, dict[str, Any]]] = []
        self._error: BaseException | None = None
        self._stopped = False
        # Started with the session, so a child builder's imports overlap the first batch.
        self._builder = open_builder(
            run_id, self.specs, store, before_publish=before_publish, kind=builder
        )
        self.builder_kind = self._builder.kind
        self._thread = threading.Thread(
            target=self._loop, name=f"assetcast-datasets-{run_id}", daemon=True
        )
        self._thread.start()

    def __bool__(self) -> bool:
        return bool(self.specs)

    # ------------------------------------------------------------------ collector side

    def request(self, version: int, *, catch_up: bool = False) -> None:
        """Bring the datasets up to the log at ``version`` (which the writer will reach).

        ``catch_up``: build it as soon as the builder is free, whatever the interval since the
        last build. The collector asks so when its last batch starts: the build at
        :meth:`finish` waits on the collector's critical path, and it then holds only that
        last batch instead of every batch the pacing let pile up (each costs its share of
        the build however it is grouped; only the fixed cost per version is paid once more)."""
        self._raise_pending()
        with self._lock:
            self._wanted = version if self._wanted is None else max(self._wanted, version)
            self._catch_up = self._catch_up or catch_up
            self._lock.notify_all()

    def take_events(self) -> list[tuple[str, dict[str, Any]]]:
        """`DatasetUpdated` events ready to be appended (the caller appends them next)."""
        self._raise_pending()
        with self._lock:
            ready, self._outbox = self._outbox, []
        return ready

    def finish(self) -> list[tuple[str, dict[str, Any]]]:
        """Wait for every requested build (started at once, whatever the interval); return
        the events still to append."""
        with self._lock:
            self._flush = True
            self._lock.notify_all()
            while (self._wanted is not None or self._busy) and self._error is None:
                self._lock.wait()
        return self.take_events()

    def close(self) -> None:
        """Stop building (a build waiting for the log gives up), wait for the thread, and
        release the builder (a child process is stopped and reaped)."""
        with self._lock:
            self._stopped = True
            self._lock.notify_all()
        self._builder.stop()
        self._thread.join(timeout=60)
        self._builder.close()

    def _raise_pending(self) -> None:
        if self._error is not None:
            raise self._error

    # ------------------------------------------------------------------ worker side

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._stopped:
                    if self._wanted is None:
                        self._lock.wait()
                        continue
                    delay = self._idle_until - time.monotonic()
                    if delay <= 0 or self._flush or self._catch_up:
                        break
                    self._lock.wait(timeout=delay)  # later requests join this build
                if self._stopped:
                    return
                version, self._wanted, self._busy = self._wanted, None, True
                self._catch_up = False
            pacing = (
                _ShortSwitchInterval() if self._builder.shares_gil else contextlib.nullcontext()
            )
            try:
                with pacing:
                    built = self._update(version)
            except BaseException as error:  # raised in the collector at its next call
                with self._lock:
                    self._error, self._busy = error, False
                    self._lock.notify_all()
                return
            with self._lock:
                self.builds.append(BuildRecord(version, built.wall_s, built.cpu_s))
                self._outbox.extend(built.events)
                self._busy = False
                # The build's own duration: not its wait for the log, nor a child builder's
                # start-up (its imports overlap the first batch; they are no build cost).
                self._idle_until = time.monotonic() + max(
                    self.min_interval_s, built.wall_s * (1 / self.max_duty - 1)
                )
                self._lock.notify_all()

    def _update(self, version: int) -> Built:
        return self._builder.build(version)
