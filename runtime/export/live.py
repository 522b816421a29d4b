"""Live datasets: a collection session keeps its datasets up to date as batches finish.

The same code as `export` (:func:`runtime.export.dataset.build_version`) runs on the log as
it stands once the batch's events are appended, so a dataset never holds an episode the log
lacks. It runs on a background thread, overlapping the next batch's episodes: the collector
only says "the log will be at version V" (:meth:`LiveDatasets.request`); the thread waits until
the log reaches V, projects exactly the events up to V, publishes, and leaves a `DatasetUpdated`
for the collector to append with its next transaction, under the lease it holds. Requests that
pile up while a build runs, or within ``MIN_BUILD_INTERVAL_S`` of the previous build, collapse
into the latest one. Each update folds only the events appended since the last one and reads
only the first episode and the new ones. At the end of the session the
collector waits for the last build (:meth:`finish`), so the final dataset holds every committed
episode and equals what `export` writes from the finished log, byte for byte.

A SIGKILL at any moment leaves the previous complete version (or the new one) on disk; the
next session's first request brings it up to date and records it.
"""

from __future__ import annotations

import bisect
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from runtime.export.dataset import DatasetSpec, build_version
from runtime.export.episodes import DatasetSource, EpisodeData, RunFold, dataset_source
from runtime.export.record import recorded_digest

log = structlog.get_logger(__name__)

_POLL_S = 0.005
# While a build runs, the interpreter hands the GIL over every 0.5 ms instead of every 5 ms.
# The collector thread lets go of the GIL many times per episode (MuJoCo steps, SQLite,
# fsync), and each time a busy build thread holds it until the switch interval forces a
# handover, so the collector waits up to that interval per release. Measured with
# bench/bench_live_dataset.py (robomimic, run-queue-corrected wall ratio): 1.15 at 5 ms,
# 1.02 at 0.5 ms.
_BUILD_SWITCH_INTERVAL_S = 0.0005
# A build starts no sooner than this after the previous one ended (the session's first one and
# the final one at `finish` start at once): batches that end meanwhile are built together.
# Every version costs a round of fsyncs, and on a journaling file system the collector's own
# fsyncs (trajectories, the log) wait behind them; with batches of a second or less, one
# version per batch would tie the collector to the dataset's disk traffic.
MIN_BUILD_INTERVAL_S = 1.0
# ... and no sooner than its own duration times (1 / MAX_BUILD_DUTY - 1): a build whose cost
# grows with the dataset (robomimic copies and re-hashes its one file) is kept to at most this
# share of the collection's wall time, whatever the dataset's size. Much of a build holds the
# GIL (h5py runs under its own lock with the GIL held), so its busy time is time the collector
# thread cannot run; the dataset lags the log by at most that idle time, and `finish` brings
# it up to date at once.
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


class LiveDatasets:
    """The datasets one collection session maintains for its run."""

    def __init__(
        self,
        run_id: str,
        specs: Sequence[DatasetSpec],
        store: Any,
        *,
        before_publish: Callable[[], None] = lambda: None,
        min_interval_s: float = MIN_BUILD_INTERVAL_S,
        max_duty: float = MAX_BUILD_DUTY,
    ) -> None:
        if not 0 < max_duty <= 1:
            raise ValueError(f"max_duty must be in (0, 1], not {max_duty!r}")
        self.run_id = run_id
        self.before_publish = before_publish
        self.min_interval_s = min_interval_s
        self.max_duty = max_duty
        self._idle_until = 0.0  # time.monotonic() before which no build starts (bar finish)
        self._flush = False
        self.specs = tuple(specs)
        self.store = store
        self._cache: dict[tuple[str, str], EpisodeData] = {}
        self._lock = threading.Condition()
        self._wanted: int | None = None
        self._busy = False
        self._outbox: list[tuple[str, dict[str, Any]]] = []
        self._error: BaseException | None = None
        self._stopped = False
        self._fold = RunFold(run_id)
        self._unfolded: list[Any] = []  # read from the log, beyond the version built last
        self._folded = 0
        self._recorded: dict[str, str | None] | None = None
        self._thread = threading.Thread(
            target=self._loop, name=f"assetcast-datasets-{run_id}", daemon=True
        )
        self._thread.start()

    def __bool__(self) -> bool:
        return bool(self.specs)

    # ------------------------------------------------------------------ collector side

    def request(self, version: int) -> None:
        """Bring the datasets up to the log at ``version`` (which the writer will reach)."""
        self._raise_pending()
        with self._lock:
            self._wanted = version if self._wanted is None else max(self._wanted, version)
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
        with self._lock:
            self._stopped = True
            self._lock.notify_all()
        self._thread.join(timeout=60)

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
                    if delay <= 0 or self._flush:
                        break
                    self._lock.wait(timeout=delay)  # later requests join this build
                if self._stopped:
                    return
                version, self._wanted, self._busy = self._wanted, None, True
            started = time.monotonic()
            try:
                with _ShortSwitchInterval():
                    events = self._update(version)
            except BaseException as error:  # raised in the collector at its next call
                with self._lock:
                    self._error, self._busy = error, False
                    self._lock.notify_all()
                return
            with self._lock:
                self._outbox.extend(events)
                self._busy = False
                ended = time.monotonic()
                self._idle_until = ended + max(
                    self.min_interval_s, (ended - started) * (1 / self.max_duty - 1)
                )
                self._lock.notify_all()

    def _events_up_to(self, version: int) -> list[Any]:
        """The run's events after the last version folded, up to ``version``, read
        incrementally as the writer appends (each event is read and folded once)."""
        while not self._unfolded or self._unfolded[-1].seq < version:
            after = self._unfolded[-1].seq if self._unfolded else self._folded
            if after >= version:
                break
            new = self.store.read(self.run_id, after_seq=after)
            if new:
                self._unfolded.extend(new)
                continue
            if self._stopped:
                raise RuntimeError("the collection ended before the log reached the dataset")
            time.sleep(_POLL_S)
        cut = bisect.bisect_right([e.seq for e in self._unfolded], version)
        taken, self._unfolded = self._unfolded[:cut], self._unfolded[cut:]
        if taken:
            self._folded = taken[-1].seq
        return taken

    def _update(self, version: int) -> list[tuple[str, dict[str, Any]]]:
        events = self._events_up_to(version)
        if self._recorded is None:
            self._recorded = {
                str(spec.path): recorded_digest(events, str(spec.path)) for spec in self.specs
            }
        run = self._fold.add(events).source()
        if not run.episodes:
            return []
        source = dataset_source([run], cache=self._cache)
        updates = []
        for spec in self.specs:
            built = build_version(spec, source, before_publish=self.before_publish)
            if self._recorded[str(spec.path)] != built.digest:
                self._recorded[str(spec.path)] = built.digest
                updates.append(("DatasetUpdated", built.event_payload(self.run_id, version)))
        self._forget_reused(source)
        return updates

    def _forget_reused(self, source: DatasetSource) -> None:
        """An update reads only the first episode and the new ones (LeRobot takes the rest
        over from the version on disk, robomimic copies the batches the file already holds),
        so only the first stays loaded."""
        first = source.episodes[0]
        key = (str(first.trajectory_path), first.provenance.trajectory_sha256)
        self._cache = {key: self._cache[key]} if key in self._cache else {}
