"""Collection benchmarks: what the ledger costs, and how fast a big run resumes.

1. Ledger overhead: the same demo collection (same task, assets, seed) on the SQLite event
   store and on the in-memory store, alternating and repeated; the ratio of medians is the
   price of a durable log (goal <= 1.02). Each is run twice over: with the ledger writer
   pipelined (the default; appends overlap the next episode) and synchronous
   (``LEDGER_PIPELINE_DEPTH = 0``, every fsync on the critical path), so the before/after
   comparison comes from one run on one machine state.
2. Resume start-up: a run whose log holds ~100k events (a real prepared demo run plus a
   synthesized, legal collection history of 20k done episodes, then RunFailed) is resumed in a
   fresh store object; the time from ``resume()`` to the environment factory call covers the
   cold fold, reading the log, planning, verification, RunResumed and deployment validation.

Run: ``.venv/bin/python bench/bench_collect.py`` (prints figures; not part of pytest).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import runtime.collection.session_ledger as collect_module  # noqa: E402
from runtime.collection import collect  # noqa: E402
from runtime.collection.demo_run import prepare_demo_run, write_catalog  # noqa: E402
from runtime.collection.ledger import LedgerWriter  # noqa: E402
from runtime.logging import configure_logging  # noqa: E402
from runtime.resume import resume  # noqa: E402
from runtime.seeds import episode_seed  # noqa: E402
from store import EventStore, InMemoryEventStore, NewEvent  # noqa: E402
from store.projections.collection_report import collection_report  # noqa: E402

REPEATS = 7
BATCHES, EPISODES, SETTLE = 3, 4, 20
SYNTH_EPISODES = 20_000  # x 5 events each ~ 100k events


class TimedStore:
    """Forwards to a store and accumulates the wall time spent inside ``append``."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.append_s, self.appends = inner, 0.0, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def append(self, *args: Any, **kwargs: Any) -> int:
        start = time.perf_counter()
        try:
            return self.inner.append(*args, **kwargs)
        finally:
            self.append_s += time.perf_counter() - start
            self.appends += 1


class BlockedClock:
    """Time the collector's thread spends inside LedgerWriter.submit/drain: the part of the
    ledger that is on the critical path (all of it when synchronous; enqueueing and the
    final waits when pipelined)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.originals = {name: getattr(LedgerWriter, name) for name in ("submit", "drain")}

    def __enter__(self) -> BlockedClock:
        for name, original in self.originals.items():
            setattr(LedgerWriter, name, self._timed(original))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, original in self.originals.items():
            setattr(LedgerWriter, name, original)

    def _timed(self, original: Any) -> Any:
        def timed(writer: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(writer, *args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


def timed_collection(
    store: Any, root: Path, catalog: Path, name: str, depth: int
) -> tuple[float, float, int, float]:
    """(collect wall time, time inside append, number of appends, time the collector's
    thread was blocked on the ledger). ``depth`` is the ledger pipeline depth (0: every
    append in the collector's thread)."""
    run_id = prepare_demo_run(
        store, root / name, catalog, batches=BATCHES, episodes_per_batch=EPISODES,
        settle_steps=SETTLE,
    )
    timed = TimedStore(store)
    saved, collect_module.LEDGER_PIPELINE_DEPTH = collect_module.LEDGER_PIPELINE_DEPTH, depth
    try:
        with BlockedClock() as blocked:
            start = time.perf_counter()
            collect(run_id, store=timed, progress=False)
            wall = time.perf_counter() - start
        return wall, timed.append_s, timed.appends, blocked.seconds
    finally:
        collect_module.LEDGER_PIPELINE_DEPTH = saved


def ledger_overhead(root: Path, catalog: Path) -> None:
    """Before (synchronous appends) and after (pipelined) side by side, interleaved."""
    sqlite_store = EventStore(f"sqlite:///{root / 'bench.db'}")
    memory_store = InMemoryEventStore()
    stores = {"sqlite": sqlite_store, "memory": memory_store}
    modes = {"sync": 0, "pipelined": collect_module.LEDGER_PIPELINE_DEPTH}
    timed_collection(memory_store, root, catalog, "warmup", 1)  # imports, caches
    runs: dict[tuple[str, str], list[tuple[float, float, int, float]]] = {
        (mode, name): [] for mode in modes for name in stores
    }
    for i in range(REPEATS):  # interleaved, so background load hits every variant alike
        for (mode, name), items in runs.items():
            items.append(
                timed_collection(stores[name], root, catalog, f"{mode}_{name}_{i}", modes[mode])
            )
    episodes = BATCHES * EPISODES
    print(f"ledger overhead ({BATCHES} batches x {EPISODES} episodes, {REPEATS} interleaved runs"
          f" per variant; sync = appends in the collector thread, pipelined = writer thread"
          f" depth {modes['pipelined']}):")
    for (mode, name), items in runs.items():
        walls = [item[0] for item in items]
        appends = statistics.median(item[1] for item in items)
        blocked = statistics.median(item[3] for item in items)
        print(
            f"  {mode:9s} {name:7s} wall min {min(walls):.3f} s / median "
            f"{statistics.median(walls):.3f} s ({1000 * min(walls) / episodes:.1f} ms/episode);"
            f" inside append {1000 * appends:.1f} ms over {items[0][2]} appends;"
            f" collector blocked on the ledger {1000 * blocked:.1f} ms"
        )
    for mode in modes:
        s_wall = [item[0] for item in runs[(mode, "sqlite")]]
        m_wall = [item[0] for item in runs[(mode, "memory")]]
        # Noise-free estimate: the in-memory run plus the extra time the collector's thread
        # was blocked on the SQLite ledger (wall ratios swing by a few % with machine load).
        extra = statistics.median(i[3] for i in runs[(mode, "sqlite")]) - statistics.median(
            i[3] for i in runs[(mode, "memory")]
        )
        base = min(m_wall)
        print(f"  {mode:9s} ratio sqlite/in-memory: min wall {min(s_wall) / min(m_wall):.3f},"
              f" median wall {statistics.median(s_wall) / statistics.median(m_wall):.3f},"
              f" from blocked time {(base + extra) / base:.3f}  (goal <= 1.02)")
    sqlite_store.close()


def synthesize_history(store: Any, run_id: str, episodes: int) -> int:
    """Append a legal collection history: batch 0 with ``episodes`` done (rejected) episodes,
    interrupted before BatchFinished and ended by RunFailed. Returns the event count."""
    version = store.state(run_id).version
    batch = store.state(run_id).batches[0]
    head = [
        NewEvent("CollectionStarted", {
            "session_id": "0123456789ab", "host": "bench", "pid": 1,
            "episodes_per_batch": episodes + 1, "record_trajectory": False,
            "recording_dir": None,
        }),
        NewEvent("EnvironmentBuilt", {
            "session_id": "0123456789ab", "batch_index": 0, "constructions": 1,
        }),
        NewEvent("BatchStarted", {
            "batch_index": 0, "asset_set_id": batch.asset_set_id, "seed": batch.seed,
            "deployment_path": batch.deployment["deployment_path"],
        }),
        NewEvent("AssetsReplaced", {"batch_index": 0, "roles_replaced": [], "entities_kept": []}),
    ]
    version = store.append(run_id, head, expected_version=version)
    chunk: list[NewEvent] = []
    for j in range(episodes):
        key = {"batch_index": 0, "episode_index": j}
        chunk += [
            NewEvent("EpisodeStarted", {**key, "seed": episode_seed(batch.seed, j)}),
            NewEvent("InitialChecked", {**key, "passed": False, "checks": []}),
            NewEvent("EpisodeJudged", {
                **key, "accepted": False, "checks": [], "reason": "initial_checks_failed",
            }),
            NewEvent("TrajectoryDiscarded", {**key, "reason": "initial_checks_failed"}),
            NewEvent("ResetSubmitted", key),
        ]
        if len(chunk) >= 5000:
            version = store.append(run_id, chunk, expected_version=version)
            chunk = []
    if chunk:
        version = store.append(run_id, chunk, expected_version=version)
    failed = NewEvent("RunFailed", {
        "phase": "episode", "error_type": "KeyboardInterrupt", "detail": "", "traceback": "",
        "batch_index": 0, "episode_index": episodes,
    })
    return store.append(run_id, [failed], expected_version=version)


class _Reached(Exception):
    """Raised by the factory: start-up is over once the environment would be built."""


def resume_startup(root: Path, catalog: Path) -> None:
    url = f"sqlite:///{root / 'resume.db'}"
    writer = EventStore(url)
    run_id = prepare_demo_run(
        writer, root / "big", catalog, batches=2, episodes_per_batch=1, settle_steps=SETTLE,
        record_trajectory=False,
    )
    start = time.perf_counter()
    total = synthesize_history(writer, run_id, SYNTH_EPISODES)
    synth = time.perf_counter() - start
    writer.close()

    fresh = EventStore(url)  # cold: no cached fold
    t0 = time.perf_counter()
    fresh.state(run_id)
    cold_fold = time.perf_counter() - t0
    t0 = time.perf_counter()
    events = fresh.read(run_id)
    read = time.perf_counter() - t0
    t0 = time.perf_counter()
    collection_report(events)
    projection = time.perf_counter() - t0
    fresh.close()

    reached: list[float] = []

    def factory(deployment_dir: Path, *, seed: int, settle_steps: int) -> Any:
        reached.append(time.perf_counter())
        raise _Reached

    store = EventStore(url)  # cold again
    start = time.perf_counter()
    try:
        resume(run_id, store=store, environment_factory=factory, progress=False)
    except _Reached:
        pass
    startup = reached[0] - start
    print(f"resume start-up on a run of {total} events (synthesized in {synth:.1f} s):")
    print(f"  resume() -> environment factory: {startup:6.2f} s")
    print(f"  of which, measured separately: cold fold {cold_fold:.2f} s, read {read:.2f} s, "
          f"report projection {projection:.2f} s")


def main() -> None:
    configure_logging(level="error")
    with tempfile.TemporaryDirectory(prefix="bench_collect_") as tmp:
        root = Path(tmp)
        catalog = write_catalog(root / "catalog")
        ledger_overhead(root, catalog)
        resume_startup(root, catalog)


if __name__ == "__main__":
    main()
