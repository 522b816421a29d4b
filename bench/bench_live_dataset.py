"""Live-dataset overhead on a collection: the same state-only collection with and without a
live dataset (``--dataset lerobot:DIR``, then ``--dataset robomimic:FILE``).

Each pair is two fresh runs of the demo task (same seed, same size) collected back to back,
one plain and one with the live dataset, the order alternating from pair to pair so drift on
the shared box hits both sides alike. Per pair: ratio = with / without; printed are the median
and the minimum of the per-pair ratios and their spread (goal: median <= 1.05), twice: on
plain wall time, and on wall time less the collector thread's run-queue wait (Linux
schedstat: the time it was runnable but other processes had the CPUs). On a box shared by
many busy processes the first swings by tens of percent from run to run; the second is what
the collection would take on a box of its own, GIL waits, fsyncs and the final wait for the
dataset included, and is the figure to hold against the goal. Beside it, the time the
dataset updates themselves take (summed over the session: wall and CPU time of the dataset
thread's builds, without its waits for the log), and how long the collector waited for the
last build at the end of the session (the only part that is on its critical path by design).
The timings come from wrappers this script puts around ``LiveDatasets``' methods; the library
has no hooks for it.

Run: ``.venv/bin/python bench/bench_live_dataset.py`` (prints figures; not part of pytest).
Environment: ``BENCH_LIVE_PAIRS`` (default 5), ``BENCH_LIVE_BATCHES`` (default 10),
``BENCH_LIVE_EPISODES`` (episodes per batch, default 6), ``BENCH_LIVE_BUILDERS`` (comma
list of ``default``, ``process``, ``thread``; default ``default``: what a collection chooses,
the thread builder unless ``ASSETCAST_LIVE_BUILDER`` says otherwise; ``process,thread``
measures both beside the same plain collections, in groups of three whose order rotates),
``BENCH_LIVE_FORMATS`` (default ``lerobot,robomimic``).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runtime.collection import collect  # noqa: E402
from runtime.collection.demo_run import prepare_demo_run, write_catalog  # noqa: E402
from runtime.export import live  # noqa: E402
from runtime.export.dataset import DatasetSpec  # noqa: E402
from runtime.logging import configure_logging  # noqa: E402
from store import EventStore  # noqa: E402

PAIRS = int(os.environ.get("BENCH_LIVE_PAIRS", "5"))
BATCHES = int(os.environ.get("BENCH_LIVE_BATCHES", "10"))
EPISODES = int(os.environ.get("BENCH_LIVE_EPISODES", "6"))
FORMATS = os.environ.get("BENCH_LIVE_FORMATS", "lerobot,robomimic").split(",")
# Which builders to measure, each beside the same plain collections (interleaved groups):
# "process", "thread", or "default" (what a collection chooses: $ASSETCAST_LIVE_BUILDER, else
# the thread).
BUILDERS: list[str | None] = [
    None if name.strip() == "default" else name.strip()
    for name in os.environ.get("BENCH_LIVE_BUILDERS", "default").split(",")
]
SETTLE = 10


@dataclass
class UpdateTimes:
    """What one collection's live datasets recorded, and its final wait."""

    builds: list[tuple[float, float]] = field(default_factory=list)  # (wall, cpu) per update
    final_wait: float = 0.0
    builder: str = "?"

    @property
    def wall(self) -> float:
        return sum(w for w, _c in self.builds)

    @property
    def cpu(self) -> float:
        return sum(c for _w, c in self.builds)


class Instrument:
    """Reads each session's build record (``LiveDatasets.builds``: wall and CPU seconds per
    build, measured by the builder, wherever it runs) at ``close``, and times ``finish``.
    ``builder``: the variant the next sessions use (None: the default, what a collection
    chooses)."""

    def __init__(self) -> None:
        self.current = UpdateTimes()
        self.builder: str | None = None
        cls = live.LiveDatasets
        init, finish, close = cls.__init__, cls.finish, cls.close
        times = self

        def chosen_init(self: Any, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("builder", times.builder)
            init(self, *args, **kwargs)

        def timed_finish(self: Any) -> Any:
            start = time.perf_counter()
            try:
                return finish(self)
            finally:
                times.current.final_wait += time.perf_counter() - start

        def recorded_close(self: Any) -> None:
            close(self)
            times.current.builds.extend((b.wall_s, b.cpu_s) for b in self.builds)
            times.current.builder = self.builder_kind

        cls.__init__ = chosen_init  # type: ignore[method-assign]
        cls.finish = timed_finish  # type: ignore[method-assign]
        cls.close = recorded_close  # type: ignore[method-assign]

    def take(self) -> UpdateTimes:
        taken, self.current = self.current, UpdateTimes()
        return taken


def runqueue_wait() -> float:
    """Seconds this thread has spent runnable but waiting for a CPU (Linux schedstat)."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as handle:
            return int(handle.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def one_collection(
    store: EventStore, catalog: Path, root: Path, name: str,
    spec_of: Callable[[Path], Any] | None,
) -> tuple[float, float]:
    """(wall, wall less the collector thread's run-queue wait) of one collection."""
    run_id = prepare_demo_run(store, root / name, catalog, batches=BATCHES,
                              episodes_per_batch=EPISODES, settle_steps=SETTLE, cameras=False)
    datasets = [spec_of(root / name)] if spec_of is not None else []
    start, queued = time.perf_counter(), runqueue_wait()
    collect(run_id, store=store, progress=False, datasets=datasets)
    wall = time.perf_counter() - start
    return wall, wall - (runqueue_wait() - queued)


def overhead(
    store: EventStore, catalog: Path, root: Path, fmt: str, instrument: Instrument
) -> None:
    suffix = "" if fmt == "lerobot" else ".hdf5"

    def spec_of(run_dir: Path) -> DatasetSpec:
        return DatasetSpec(fmt, run_dir.parent / f"{run_dir.name}-dataset{suffix}")

    sides: list[str | None] = ["plain", *BUILDERS]  # "plain": no live dataset
    walls: dict[str | None, list[float]] = {side: [] for side in sides}
    unqueued: dict[str | None, list[float]] = {side: [] for side in sides}
    updates: dict[str | None, list[UpdateTimes]] = {side: [] for side in BUILDERS}
    for group in range(PAIRS):
        shift = group % len(sides)
        for side in sides[shift:] + sides[:shift]:  # each side in each place in turn
            name = f"{fmt}-{group}-{side or 'live'}"
            instrument.take()
            instrument.builder = None if side == "plain" else side
            wall, alone = one_collection(
                store, catalog, root, name, None if side == "plain" else spec_of
            )
            walls[side].append(wall)
            unqueued[side].append(alone)
            if side != "plain":
                updates[side].append(instrument.take())
    groups = "pairs" if len(sides) == 2 else f"groups of {len(sides)}"
    print(f"live dataset overhead, {fmt}, state-only ({BATCHES} batches x {EPISODES} episodes = "
          f"{BATCHES * EPISODES} episodes, {PAIRS} interleaved {groups})")
    for builder in BUILDERS:
        ran = sorted({u.builder for u in updates[builder]})
        print(f"  builder: {', '.join(ran)}")
        for label, times in (("wall", walls), ("wall - run-queue wait", unqueued)):
            plain, live_ = times["plain"], times[builder]
            ratios = [b / a for a, b in zip(plain, live_, strict=True)]
            print(f"    {label}: collect {statistics.median(plain):.2f} s, with {fmt} "
                  f"{statistics.median(live_):.2f} s (medians)")
            print(f"      per-pair ratio {statistics.median(ratios):.3f} median, "
                  f"{min(ratios):.3f} min, {max(ratios):.3f} max, spread "
                  f"{max(ratios) - min(ratios):.3f} [{', '.join(f'{r:.3f}' for r in ratios)}] "
                  "(goal: median <= 1.05)")
        done = updates[builder]
        per_update = [w for u in done for w, _c in u.builds]
        print(f"    dataset updates: {statistics.median([len(u.builds) for u in done]):.0f} per "
              f"collection, summed per collection {statistics.median([u.wall for u in done]):.3f}"
              f" s wall / {statistics.median([u.cpu for u in done]):.3f} s CPU (medians); one "
              f"update {statistics.median(per_update) * 1000:.1f} ms median, "
              f"{max(per_update) * 1000:.1f} ms max")
        print(f"    final wait: {statistics.median([u.final_wait for u in done]) * 1000:.0f} ms "
              "median (the collector waiting for the last build at the end of its session)",
              flush=True)


def main() -> None:
    configure_logging(level="warning")
    root = Path(tempfile.mkdtemp(prefix="assetcast-bench-live-"))
    started = time.perf_counter()
    try:
        store = EventStore(f"sqlite:///{root / 'bench.db'}")
        catalog = write_catalog(root / "catalog")
        instrument = Instrument()
        # Warm-up (imports, caches): one small collection with both datasets.
        run_id = prepare_demo_run(store, root / "warm", catalog, batches=2,
                                  episodes_per_batch=2, settle_steps=SETTLE, cameras=False)
        collect(run_id, store=store, progress=False, datasets=[
            DatasetSpec("lerobot", root / "warm-lerobot"),
            DatasetSpec("robomimic", root / "warm.hdf5"),
        ])
        instrument.take()
        for fmt in FORMATS:
            overhead(store, catalog, root, fmt, instrument)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"(bench wall time {time.perf_counter() - started:.0f} s; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})")


if __name__ == "__main__":
    main()
