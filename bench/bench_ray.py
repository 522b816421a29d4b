"""Ray executor benchmark: episodes/min on 1 and 2 workers, the dispatch + transfer cost per
episode, and what limits one driver (the single writer) at 100 workers.

Runs itself inside a fresh loopback-only network namespace (``unshare --net``; Ray must
never start on the host's network), on one local Ray instance shared by all runs:

1. The same demo collection (gantry, same task, seed and assets) with cameras off and on,
   collected in process (no Ray), then on 1 and 2 Ray workers, side by side. Episodes/min
   is measured steady-state (from each run's first to its last episode result at the
   driver, so actor start-up and the first environment build are excluded) and wall-clock.
   Goal: 2 workers >= 1.7x 1 worker.
2. Dispatch + transfer overhead as a share of episode time: on the workers, the idle gaps
   between consecutive queued calls (Ray's per-call dispatch and result hand-off), plus on
   the driver the time to fetch already-complete results (deserializing the files' bytes)
   and to pack + put deployments, over the workers' episode compute time. Goal: < 5%.
3. The single writer: durable episode transactions/s (one transaction = one episode's 6
   events + its share of batch events) on SQLite (WAL, synchronous=FULL) and on a private
   PostgreSQL cluster (fsync on), against the episodes/s 100 workers would produce.

Run: ``make bench`` or ``.venv/bin/python bench/bench_ray.py`` (prints figures).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.loopback_netns import (  # noqa: E402
    MARKER_ENV,
    NamespaceUnavailable,
    in_loopback_only_namespace,
    namespaced,
)

CASES = {  # cameras -> (batches, episodes per batch): with 2 workers, one batch each
    False: (2, 24),
    True: (2, 6),
}
SEED, SETTLE = 5, 10
RUN_ID = "run-20261201-000000-be7c40"  # one id for every run (own databases): same file bytes
WRITER_TXNS = 400
FLEET = 100


def _reexec_in_namespace() -> int:
    import subprocess

    from tests.loopback_netns import probe

    try:
        probe()
    except NamespaceUnavailable as error:
        print(f"bench_ray: cannot create a loopback-only network namespace: {error}")
        return 1
    env = {**os.environ, MARKER_ENV: "1"}
    return subprocess.call(namespaced([sys.executable, *sys.argv]), cwd=REPO, env=env)


class Timeline:
    """Driver-side arrival time and worker of every episode result (Driver.handle wrapped)."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, str]] = []

    def install(self) -> Any:
        import runtime.collection.driver as driver_module
        from runtime.collection.executors import EpisodeDone

        real = driver_module.Driver.handle
        timeline = self

        def handle(self: Any, report: Any, bar: Any) -> None:
            if isinstance(report, EpisodeDone):
                timeline.arrivals.append((time.perf_counter(), report.worker))
            real(self, report, bar)

        driver_module.Driver.handle = handle  # type: ignore[method-assign]
        return lambda: setattr(driver_module.Driver, "handle", real)


class ExecutorSpy:
    """Keeps the Ray executor of a run so its timings can be read after it closed."""

    def __init__(self) -> None:
        self.executors: list[Any] = []

    def install(self) -> Any:
        from runtime.collection.executors.ray import RayExecutor

        real = RayExecutor.__init__
        spy = self

        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            real(self, *args, **kwargs)
            spy.executors.append(self)

        RayExecutor.__init__ = init  # type: ignore[method-assign]
        return lambda: setattr(RayExecutor, "__init__", real)


def steady_rate(arrivals: list[tuple[float, str]]) -> float:
    """Episodes/min while every worker was producing: from the first result of the last
    worker to start to the last result of the first worker to finish (start-up, the first
    environment build and the unbalanced tail excluded)."""
    by_worker: dict[str, list[float]] = {}
    for at, worker in arrivals:
        by_worker.setdefault(worker, []).append(at)
    start = max(times[0] for times in by_worker.values())
    end = min(times[-1] for times in by_worker.values())
    inside = sum(1 for at, _ in arrivals if start < at <= end)
    if end <= start or inside < 2:
        return float("nan")
    return inside / (end - start) * 60.0


def overhead(executor: Any) -> tuple[float, float, float]:
    """(share, compute s, overhead s) of one Ray run."""
    compute = gaps = 0.0
    for calls in executor.timings.values():
        previous: tuple[str, float, float] | None = None
        for kind, entered, left in calls:
            if kind == "episode":
                compute += left - entered
                if previous is not None and previous[0] == "episode":
                    gaps += entered - previous[2]
            previous = (kind, entered, left)
    spent = gaps + executor.get_s + executor.pack_s
    return (spent / compute if compute else float("nan")), compute, spent


def one_run(base: Path, catalog: Path, name: str, cameras: bool, workers: int | None) -> dict:
    from runtime.collection import collect
    from runtime.collection.demo_run import prepare_demo_run
    from store import EventStore

    batches, episodes = CASES[cameras]
    store = EventStore(f"sqlite:///{base / f'{name}.db'}")
    run_id = prepare_demo_run(
        store, base / name, catalog, seed=SEED, batches=batches, episodes_per_batch=episodes,
        settle_steps=SETTLE, cameras=cameras, run_id=RUN_ID,
    )
    timeline, spy = Timeline(), ExecutorSpy()
    undo = [timeline.install(), spy.install()]
    started = time.perf_counter()
    try:
        # ray_address="auto": this process's Ray instance, even for one worker
        address = "auto" if workers is not None else None
        collect(run_id, store=store, progress=False, workers=workers or 1, ray_address=address)
    finally:
        for step in undo:
            step()
    wall = time.perf_counter() - started
    n = len(timeline.arrivals)
    hashes = sorted(
        (e.payload["batch_index"], e.payload["episode_index"], e.payload["sha256"])
        for e in store.read(run_id) if e.type == "TrajectoryCommitted"
    )
    commits = [e.payload for e in store.read(run_id) if e.type == "TrajectoryCommitted"]
    size = sum(p["bytes"] + sum(f["bytes"] for f in p.get("files", ())) for p in commits)
    figures = {
        "episodes": n, "wall_s": wall, "wall_rate": n / wall * 60.0,
        "kb_per_episode": size / max(1, len(commits)) / 1024,
        "steady_rate": steady_rate(timeline.arrivals), "hashes": hashes,
    }
    if workers is not None:
        share, compute, spent = overhead(spy.executors[-1])
        figures.update(share=share, compute_s=compute, overhead_s=spent)
    return figures


def bench_workers(tmp: Path) -> dict[bool, dict[str, dict]]:
    import ray

    from runtime.collection.demo_run import write_catalog

    catalog = write_catalog(tmp / "catalog")
    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    print(f"local Ray instance started in {time.perf_counter() - started:.1f} s "
          f"(network interfaces here: lo only); load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores (other processes share them: ratios are measured side by "
          f"side, absolute rates move with the load)")
    table: dict[bool, dict[str, dict]] = {}
    try:
        for cameras in (False, True):
            batches, episodes = CASES[cameras]
            rows = {}
            for name, workers in (("in-process", None), ("ray x1", 1), ("ray x2", 2)):
                slug = f"{'cam' if cameras else 'nocam'}_{name.replace(' ', '')}"
                rows[name] = one_run(tmp, catalog, slug, cameras, workers)
            table[cameras] = rows
            same = len({tuple(r["hashes"]) for r in rows.values()}) == 1
            print(f"\ncameras {'on' if cameras else 'off'}: {batches} batches x {episodes} "
                  f"episodes; identical accepted set + SHA-256s on every executor: {same}")
            print(f"  {'executor':<12}{'steady ep/min':>14}{'wall ep/min':>13}{'wall s':>8}"
                  f"{'overhead':>10}")
            for name, r in rows.items():
                share = f"{r['share'] * 100:.2f}%" if "share" in r else "-"
                print(f"  {name:<12}{r['steady_rate']:>14.1f}{r['wall_rate']:>13.1f}"
                      f"{r['wall_s']:>8.1f}{share:>10}")
            print(f"  files per committed episode: {rows['ray x1']['kb_per_episode']:.0f} KB")
            speedup = rows["ray x2"]["steady_rate"] / rows["ray x1"]["steady_rate"]
            print(f"  2 workers / 1 worker (steady): {speedup:.2f}x (goal >= 1.7x); "
                  f"Ray x1 / in-process: "
                  f"{rows['ray x1']['steady_rate'] / rows['in-process']['steady_rate']:.2f}")
    finally:
        ray.shutdown()
    return table


def bench_writer(tmp: Path) -> dict[str, float]:
    """Durable episode transactions/s of one writer, SQLite then PostgreSQL."""
    from contextlib import ExitStack

    from store import EventStore
    from tests.store.eventgen import batch_started, collection_started, created, episode
    from tests.store.eventgen import preparation as prep

    def rate(url: str) -> float:
        store = EventStore(url)
        version = store.append("w", [*(created("w"), *prep(1)),
                                     collection_started(episodes_per_batch=WRITER_TXNS)],
                               expected_version=0)
        version = store.append("w", [batch_started(0)], expected_version=version)
        started = time.perf_counter()
        for j in range(WRITER_TXNS):
            version = store.append("w", episode(0, j), expected_version=version)
        return WRITER_TXNS / (time.perf_counter() - started)

    rates = {"SQLite (WAL, synchronous=FULL)": rate(f"sqlite:///{tmp / 'writer.db'}")}
    try:
        from tests.pg_support import PostgresUnavailable, fresh_schema, local_cluster
    except ImportError as error:  # psycopg missing
        print(f"PostgreSQL writer figure skipped: {error}")
        return rates
    try:
        with ExitStack() as stack:
            base = stack.enter_context(local_cluster(durable=True)).url
            rates["PostgreSQL (fsync on, unix socket)"] = rate(
                stack.enter_context(fresh_schema(base))
            )
    except PostgresUnavailable as error:
        print(f"PostgreSQL writer figure skipped: {error}")
    return rates


def extrapolate(table: dict[bool, dict[str, dict]], rates: dict[str, float]) -> None:
    print(f"\nsingle writer vs {FLEET} workers (one episode = one durable transaction):")
    for name, value in rates.items():
        print(f"  {name:<36}{value:>8.0f} episode transactions/s")
    for cameras, rows in table.items():
        per_worker = rows["ray x1"]["steady_rate"] / 60.0
        demand = per_worker * FLEET
        print(f"  cameras {'on ' if cameras else 'off'}: 1 worker {per_worker:.2f} ep/s -> "
              f"{FLEET} workers ~{demand:.0f} ep/s")
        for name, value in rates.items():
            print(f"    {name.split(' ')[0]:<12} headroom {value / demand:6.1f}x"
                  f"  (writer saturates near {value / per_worker:,.0f} workers)")


def main() -> int:
    if os.environ.get(MARKER_ENV) != "1" or not in_loopback_only_namespace():
        return _reexec_in_namespace()
    from runtime.logging import configure_logging

    configure_logging(level="error")
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as d:
        tmp = Path(d)
        table = bench_workers(tmp)
        extrapolate(table, bench_writer(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
