"""Preparation wall time on the demo catalog: SQLite ledger vs InMemoryEventStore.

Both runs do identical file work (cache snapshots, fsynced deployments, the report); the
only difference is where the ~60-70 events go. The ratio therefore shows what durable,
synchronous ledger appends (one transaction per event, WAL, synchronous=FULL) cost a
real preparation. Runs alternate between backends and the median of each is reported.
"""

from __future__ import annotations

import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from domain.config import CollectionConfig  # noqa: E402
from runtime.assets.demo_catalog import write_demo_catalog  # noqa: E402
from runtime.assets.providers import DirectoryAssetProvider  # noqa: E402
from runtime.prepare import prepare  # noqa: E402
from store import EventStore, InMemoryEventStore  # noqa: E402

TASK = Path(__file__).resolve().parents[1] / "runtime" / "demo" / "task.yaml"
REPEATS = 5
CFG = CollectionConfig(seed=0, max_batches=4)


def _one(root: Path, catalog: Path, store: object, tag: str) -> tuple[float, int]:
    provider = DirectoryAssetProvider(catalog)
    start = time.perf_counter()
    result = prepare(
        TASK, {"item": provider, "bin": provider}, cfg=CFG, output_dir=root / tag, store=store
    )
    elapsed = time.perf_counter() - start
    return elapsed, len(store.read(result.run_id))  # type: ignore[attr-defined]


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
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


if __name__ == "__main__":
    main()
