"""Benchmark: preparing the demo catalog into the verified cache vs raw SHA-256.

Prints, in one run: cold preparation (copy + hash + reference/mesh checks +
collision pieces + atomic rename), warm preparation (cache hit, full
re-verification of every digest), and a raw ``hashlib.sha256`` pass over the
same package bytes, as packages/s and MB/s of package bytes hashed.

    .venv/bin/python bench/bench_assets.py [--rounds N]
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from domain.assets import PreparationContext  # noqa: E402
from runtime.assets.cache import prepare_package  # noqa: E402
from runtime.assets.demo_catalog import write_demo_catalog  # noqa: E402


def _timed(fn: Callable[[], None], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def _report(label: str, times: list[float], packages: int, nbytes: int) -> None:
    best, median = min(times), statistics.median(times)
    print(
        f"{label:<34} median {median * 1e3:8.2f} ms  best {best * 1e3:8.2f} ms  "
        f"{packages / median:9.1f} packages/s  {nbytes / median / 1e6:8.2f} MB/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory(prefix="bench-assets-") as tmp:
        root = Path(tmp)
        packages = write_demo_catalog(root / "catalog")
        files = [f for p in packages for f in sorted(p.rglob("*")) if f.is_file()]
        nbytes = sum(f.stat().st_size for f in files)
        print(f"demo catalog: {len(packages)} packages, {len(files)} files, {nbytes / 1e3:.1f} kB")

        counter = iter(range(10**6))

        def cold() -> None:
            context = PreparationContext(str(root / f"cache-{next(counter)}"))
            for package in packages:
                prepare_package(package, candidate_id=package.name, locator=str(package),
                                context=context)

        warm_context = PreparationContext(str(root / "cache-warm"))

        def warm() -> None:
            for package in packages:
                prepare_package(package, candidate_id=package.name, locator=str(package),
                                context=warm_context)

        def raw() -> None:
            for f in files:
                hashlib.sha256(f.read_bytes()).hexdigest()

        warm()  # populate the warm cache once
        results = {
            "cold prepare (fresh cache)": _timed(cold, args.rounds),
            "warm prepare (verified reuse)": _timed(warm, args.rounds),
            "raw hashlib.sha256 (read+hash)": _timed(raw, args.rounds),
        }
        for label, times in results.items():
            _report(label, times, len(packages), nbytes)
        raw_median = statistics.median(results["raw hashlib.sha256 (read+hash)"])
        for label in ("cold prepare (fresh cache)", "warm prepare (verified reuse)"):
            ratio = statistics.median(results[label]) / raw_median
            print(f"{label} costs {ratio:.0f}x raw hashing")


if __name__ == "__main__":
    main()
