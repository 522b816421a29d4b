"""Preparation benchmarks: cold preparation of a large catalog, and the ledger's share.

1. Cold preparation of ``--packages`` packages (default 1,000: the demo catalog's packages
   copied with numbered asset ids), side by side in one run, each into a fresh cache:

   - raw copy + SHA-256 of the same files (the floor: what reading, hashing and writing the
     bytes costs with no checks, no geometry, no durability);
   - *before*: the code as it was before the preparation speed-up (commit ``BASELINE``,
     extracted with ``git archive`` and run in a child process), one ``materialize`` per
     candidate with one fsync per file -- the figure the >= 4x goal is measured against;
   - this code, the same serial fsync-per-file path (still taken below ``MIN_PARALLEL``
     candidates), to show what the CPU cuts alone give;
   - this code, one process staging and publishing in chunks (batched durability);
   - this code, the process pool plus this process (what ``prepare`` uses on a big catalog).

   Each prints wall time, packages/s and CPU ms per package (this process and its children).
   The published snapshots of the fast path must be byte-identical to *before*'s.

2. The demo preparation's wall time with the SQLite ledger vs ``InMemoryEventStore`` (both do
   identical file work; the ratio is what durable appends cost a real preparation).

    .venv/bin/python bench/bench_prepare.py [--packages N] [--skip-ledger]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import structlog

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from domain.config import CollectionConfig  # noqa: E402
from runtime.assets.demo_catalog import write_demo_catalog  # noqa: E402
from runtime.assets.providers import DirectoryAssetProvider  # noqa: E402
from runtime.prepare import prepare  # noqa: E402
from store import EventStore, InMemoryEventStore  # noqa: E402

TASK = REPO / "runtime" / "demo" / "task.yaml"
REPEATS = 5
CFG = CollectionConfig(seed=0, max_batches=4)
#: main before the preparation speed-up (issue 16): the "before" of the cold figure.
BASELINE = "710d2d5123d79c4d662e2b34cacd6818cb4c9860"

# Run by the child process, inside the extracted baseline tree: the serial fsync-per-file
# preparation of every candidate, timed in the child (imports excluded).
_BEFORE_CHILD = """
import json, logging, resource, sys, time
import structlog
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
from domain.assets import AssetQuery, PreparationContext
from runtime.assets.providers import DirectoryAssetProvider
from runtime.preparation.parallel import materialize_outcome
catalog, cache, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
provider = DirectoryAssetProvider(catalog)
candidates = list(provider.candidates(AssetQuery(None, {}, ()), count))
context = PreparationContext(cache)
own = resource.getrusage(resource.RUSAGE_SELF)
started = time.perf_counter()
outcomes = [materialize_outcome(provider, c, context) for c in candidates]
seconds = time.perf_counter() - started
end = resource.getrusage(resource.RUSAGE_SELF)
failed = [o for o in outcomes if isinstance(o, tuple)]
print(json.dumps({"seconds": seconds, "failed": len(failed),
                  "cpu": end.ru_utime - own.ru_utime + end.ru_stime - own.ru_stime}))
"""


def _catalog_of(root: Path, count: int) -> Path:
    """``count`` distinct packages: the demo catalog's, copied with numbered asset ids."""
    demo = write_demo_catalog(root / "demo")
    for i in range(count):
        source = demo[i % len(demo)]
        target = root / "catalog" / f"{source.name}-{i:04d}"
        shutil.copytree(source, target)
        manifest = target / "asset.catalog.json"
        data = json.loads(manifest.read_text())
        data["descriptor"]["asset_id"] = f"{data['descriptor']['asset_id']}-{i:04d}"
        manifest.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return root / "catalog"


def _extract_baseline(target: Path) -> bool:
    """The BASELINE tree under ``target`` (False when git or the commit is unavailable,
    e.g. a shallow clone)."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", BASELINE],
            capture_output=True, check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return False
    target.mkdir(parents=True)
    archive_path = target.with_suffix(".tar")
    archive_path.write_bytes(archive)
    with tarfile.open(archive_path) as tar:
        tar.extractall(target, filter="data")
    return True


def _before(baseline: Path, catalog: Path, cache: Path, count: int) -> tuple[float, float]:
    """Wall seconds and CPU seconds of the baseline's serial fsync-per-file preparation."""
    done = subprocess.run(
        [sys.executable, "-c", _BEFORE_CHILD, str(catalog), str(cache), str(count)],
        cwd=baseline, capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(baseline)},
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["failed"]:
        raise SystemExit(f"baseline: {result['failed']} packages failed")
    return result["seconds"], result["cpu"]


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def cold_preparation(count: int) -> None:
    from domain.assets import AssetQuery, PreparationContext
    from runtime.preparation.parallel import WORKERS_ENV, MaterializerPool, materialize_outcome
    from runtime.syncfs import syncfs_available

    with tempfile.TemporaryDirectory(prefix="bench-prepare-cold-", dir="/tmp") as tmp:
        root = Path(tmp)
        catalog = _catalog_of(root, count)
        provider = DirectoryAssetProvider(catalog)
        candidates = list(provider.candidates(AssetQuery(None, {}, ()), count))
        files = [f for f in sorted(catalog.rglob("*")) if f.is_file()]
        baseline = root / "baseline"
        has_baseline = _extract_baseline(baseline)

        def check(outcomes: list) -> None:
            failed = [o for o in outcomes if isinstance(o, tuple)]
            if failed:
                raise SystemExit(f"{len(failed)} packages failed: {failed[0]}")

        def raw() -> None:
            out = root / "raw"
            for f in files:
                data = f.read_bytes()
                hashlib.sha256(data).hexdigest()
                target = out / f.relative_to(catalog)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)

        def serial() -> None:
            context = PreparationContext(str(root / "cache-serial"))
            check([materialize_outcome(provider, c, context) for c in candidates])

        def pooled(workers: int, tag: str) -> None:
            os.environ[WORKERS_ENV] = str(workers)
            try:
                context = PreparationContext(str(root / f"cache-{tag}"))
                with MaterializerPool() as pool:
                    check([o for c in pool.materialize(provider, candidates, context) for o in c])
            finally:
                os.environ.pop(WORKERS_ENV, None)

        cores = os.cpu_count() or 1
        before = f"before ({BASELINE[:7]}), fsync per file"
        after = f"{cores} processes (pool + this), batched"
        runs: list[tuple[str, Callable[[], None]]] = [
            ("raw copy + sha256", raw),
            ("this code, serial, fsync per file", serial),
            ("this code, 1 process, batched", lambda: pooled(1, "batched")),
            (after, lambda: pooled(cores, "pool")),
        ]
        timings: dict[str, tuple[float, float]] = {}
        for label, run in runs:
            cpu, started = _cpu_seconds(), time.perf_counter()
            run()
            timings[label] = (time.perf_counter() - started, _cpu_seconds() - cpu)
            if label == runs[0][0] and has_baseline:  # before, right after the floor
                timings[before] = _before(baseline, catalog, root / "cache-before", count)
        reference = "cache-before" if has_baseline else "cache-serial"
        identical = all(
            _tree_digest(entry) == _tree_digest(root / tag / entry.name)
            for entry in sorted((root / reference).iterdir())
            for tag in ("cache-serial", "cache-batched", "cache-pool")
        )
        load = os.getloadavg()
    print(f"cold preparation of {count} packages ({len(files)} files, {cores} cores, "
          f"syncfs {'available' if syncfs_available() else 'unavailable: per-entry fsync'}, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}):")
    for label, (seconds, cpu) in timings.items():
        print(f"  {label:<40} {seconds:7.2f} s  {count / seconds:8.1f} packages/s  "
              f"CPU {1000 * cpu / count:6.2f} ms/package")
    raw_s = timings["raw copy + sha256"][0]
    if has_baseline:
        slow = timings[before][0]
        print(f"  speed-up pool / before: {slow / timings[after][0]:.2f}x (goal >= 4x); "
              f"pool costs {timings[after][0] / raw_s:.1f}x raw copy + hash "
              f"(before: {slow / raw_s:.1f}x)")
    else:
        print(f"  before: commit {BASELINE[:7]} not available here (shallow clone?): "
              "no speed-up figure")
    print(f"  published snapshots byte-identical to {reference[6:]}: {identical}")


def _one(root: Path, catalog: Path, store: object, tag: str) -> tuple[float, int]:
    provider = DirectoryAssetProvider(catalog)
    start = time.perf_counter()
    result = prepare(
        TASK, {"item": provider, "bin": provider}, cfg=CFG, output_dir=root / tag, store=store
    )
    elapsed = time.perf_counter() - start
    return elapsed, len(store.read(result.run_id))  # type: ignore[attr-defined]


def ledger_share() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-prepare-") as tmp:
        root = Path(tmp)
        catalog = root / "catalog"
        packages = len(write_demo_catalog(catalog))
        sqlite_store = EventStore(f"sqlite:///{root / 'ledger.db'}")
        _one(root, catalog, InMemoryEventStore(), "warmup")  # imports, first-touch caches
        sqlite_times, memory_times, events = [], [], 0
        for i in range(REPEATS):
            elapsed, events = _one(root, catalog, sqlite_store, f"sqlite{i}")
            sqlite_times.append(elapsed)
            elapsed, _ = _one(root, catalog, InMemoryEventStore(), f"memory{i}")
            memory_times.append(elapsed)
    sqlite_median = statistics.median(sqlite_times)
    memory_median = statistics.median(memory_times)
    print(f"demo catalog: {packages} packages x 2 roles, {CFG.max_batches} batches, "
          f"{events} events per run, {REPEATS} runs per backend")
    print(f"SQLite ledger     median {sqlite_median * 1000:8.1f} ms  "
          f"(min {min(sqlite_times) * 1000:.1f}, max {max(sqlite_times) * 1000:.1f})")
    print(f"InMemoryEventStore median {memory_median * 1000:7.1f} ms  "
          f"(min {min(memory_times) * 1000:.1f}, max {max(memory_times) * 1000:.1f})")
    print(f"ratio SQLite / in-memory: {sqlite_median / memory_median:.2f}x "
          f"(+{(sqlite_median - memory_median) / events * 1000:.2f} ms per event)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=int, default=1000,
                        help="packages in the cold-preparation figure (0 skips it)")
    parser.add_argument("--skip-ledger", action="store_true",
                        help="skip the SQLite vs in-memory figure")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.packages:
        cold_preparation(args.packages)
    if not args.skip_ledger:
        if args.packages:
            print()
        ledger_share()


if __name__ == "__main__":
    main()
