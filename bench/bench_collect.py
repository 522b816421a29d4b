"""Collection benchmarks: what the ledger costs, and how fast a big run resumes.

1. Ledger overhead: the same demo collection (same task, assets, seed) on the SQLite event
   store and on the in-memory store, alternating and repeated; the ratio of medians is the
   price of a durable log (goal <= 1.02).
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

from runtime.collect import collect  # noqa: E402
from runtime.collect_support.demo_run import prepare_demo_run, write_catalog  # noqa: E402
from runtime.logging import configure_logging  # noqa: E402
from runtime.resume import resume  # noqa: E402
from runtime.seeds import episode_seed  # noqa: E402
from store import EventStore, InMemoryEventStore, NewEvent  # noqa: E402
from store.projections.collection_report import collection_report  # noqa: E402

REPEATS = 5
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


def timed_collection(store: Any, root: Path, catalog: Path, name: str) -> tuple[float, float, int]:
    """(collect wall time, time inside append during collect, number of appends)."""
    run_id = prepare_demo_run(
        store, root / name, catalog, batches=BATCHES, episodes_per_batch=EPISODES,
        settle_steps=SETTLE,
    )
    timed = TimedStore(store)
    start = time.perf_counter()
    collect(run_id, store=timed, progress=False)
    return time.perf_counter() - start, timed.append_s, timed.appends


def ledger_overhead(root: Path, catalog: Path) -> None:
    sqlite_store = EventStore(f"sqlite:///{root / 'bench.db'}")
    memory_store = InMemoryEventStore()
    timed_collection(memory_store, root, catalog, "warmup")  # imports, caches
    runs: dict[str, list[tuple[float, float, int]]] = {"sqlite": [], "memory": []}
    for i in range(REPEATS):  # interleaved, so background load hits both alike
        runs["sqlite"].append(timed_collection(sqlite_store, root, catalog, f"sqlite_{i}"))
        runs["memory"].append(timed_collection(memory_store, root, catalog, f"memory_{i}"))
    episodes = BATCHES * EPISODES
    print(f"ledger overhead ({BATCHES} batches x {EPISODES} episodes, {REPEATS} interleaved runs):")
    for name, items in runs.items():
        walls = [w for w, _, _ in items]
        appends = statistics.median(a for _, a, _ in items)
        print(
            f"  {name:7s} wall min {min(walls):.3f} s / median {statistics.median(walls):.3f} s"
            f"  ({1000 * min(walls) / episodes:.1f} ms/episode); inside append "
            f"{1000 * appends:.1f} ms over {items[0][2]} appends"
        )
    s_wall = [w for w, _, _ in runs["sqlite"]]
    m_wall = [w for w, _, _ in runs["memory"]]
    print(f"  ratio sqlite/in-memory, min wall    = {min(s_wall) / min(m_wall):.3f}")
    print(f"  ratio sqlite/in-memory, median wall = "
          f"{statistics.median(s_wall) / statistics.median(m_wall):.3f}")
    # Noise-free estimate: the in-memory run plus the extra time the SQLite appends took.
    extra = statistics.median(a for _, a, _ in runs["sqlite"]) - statistics.median(
        a for _, a, _ in runs["memory"]
    )
    base = min(m_wall)
    print(f"  ratio from append time (in-memory wall + extra append time) = "
          f"{(base + extra) / base:.3f}  (goal <= 1.02)")


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
