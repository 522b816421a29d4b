"""The in-process builder: reads the log as the writer appends, folds only the new events and
publishes each dataset through :func:`runtime.export.dataset.build_version`.

It runs on the live dataset's thread (when the store has no URL) or in the child process of
:mod:`.process`; both run this class, so both publish the same bytes.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from runtime.export.dataset import DatasetSpec, build_version
from runtime.export.episodes import DatasetSource, EpisodeData, RunFold, dataset_source
from runtime.export.live_builders import Built
from runtime.export.record import recorded_digest

POLL_S = 0.005


class LogNotReached(RuntimeError):
    """The builder was stopped while it waited for the log to reach a requested version."""


class InProcessBuilder:
    """Builds one run's live datasets in this process.

    ``wait_for_log(seconds)`` pauses between two reads of a log that has not reached the
    requested version yet, and returns True when the build must give up (default: until
    :meth:`stop`). ``cpu_clock`` measures a build's CPU time (this thread's by default; the
    child process counts the whole process, its helper threads included).
    """

    kind = "thread"
    shares_gil = True

    def __init__(
        self,
        run_id: str,
        specs: Sequence[DatasetSpec],
        store: Any,
        *,
        before_publish: Callable[[], None],
        wait_for_log: Callable[[float], bool] | None = None,
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        self.run_id = run_id
        self.specs = tuple(specs)
        self.store = store
        self.before_publish = before_publish
        self._stopped = threading.Event()
        self.wait_for_log = wait_for_log or self._stopped.wait
        self.cpu_clock = cpu_clock
        self._cache: dict[tuple[str, str], EpisodeData] = {}
        self._fold = RunFold(run_id)
        self._unfolded: list[Any] = []  # read from the log, beyond the version built last
        self._folded = 0
        self._recorded: dict[str, str | None] | None = None
        self._waited = 0.0

    def stop(self) -> None:
        self._stopped.set()

    def close(self) -> None:
        self.stop()

    def build(self, version: int) -> Built:
        self._waited = 0.0
        start, cpu = time.perf_counter(), self.cpu_clock()
        events = self._update(version)
        wall = time.perf_counter() - start - self._waited
        return Built(events, wall, self.cpu_clock() - cpu)

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
            paused = time.perf_counter()
            give_up = self._stopped.is_set() or self.wait_for_log(POLL_S)
            self._waited += time.perf_counter() - paused
            if give_up:
                raise LogNotReached("the collection ended before the log reached the dataset")
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
            built = build_version(spec, source, before_publish=self.before_publish,
                                  recorded=self._recorded[str(spec.path)])
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
