"""Benchmark: resolve_asset_set for 3 roles x 1,000 candidates with 2 relations.

Roles: item fits_inside bin, bin supported_by tray. Sizes are spread so that roughly a
third of pairs satisfy each relation. Prints the median wall time over 20 seeds (the
ranking + filtering cost dominates; the search itself stops at the first valid set).
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from domain.matching import resolve_asset_set  # noqa: E402
from domain.requirements import AssetRequirements, Relation  # noqa: E402
from tests.domain.test_matching_support import bin_asset, prepared, role  # noqa: E402

N = 1000
SEEDS = 20


def pools() -> dict[str, list]:
    rng = random.Random(0)
    items = [
        prepared(f"item-{n}", size=(rng.uniform(0.02, 0.1), rng.uniform(0.02, 0.1), 0.04))
        for n in range(N)
    ]
    bins = [
        bin_asset(f"bin-{n}", (rng.uniform(0.03, 0.12), rng.uniform(0.03, 0.12), 0.06))
        for n in range(N)
    ]
    trays = [
        prepared(
            f"tray-{n}",
            "tray",
            size=(0.3, 0.3, 0.01),
            capabilities=(),
            support=(rng.uniform(0.05, 0.3), rng.uniform(0.05, 0.3)),
        )
        for n in range(N)
    ]
    return {"item": items, "bin": bins, "tray": trays}


def main() -> None:
    requirements = AssetRequirements(
        {
            "item": role("item", "block", capabilities=("antipodal_grasp",), max_extent_m=0.12),
            "bin": role("bin", "bin", capabilities=("container",), attributes={"open_top": True}),
            "tray": role("tray", "tray"),
        },
        (
            Relation("fits_inside", "item", "bin", 0.005),
            Relation("supported_by", "bin", "tray", 0.0),
        ),
    )
    data = pools()
    times, nodes = [], []
    for seed in range(SEEDS):
        start = time.perf_counter()
        result = resolve_asset_set(
            requirements, data, seed=seed, max_candidates_per_role=N, max_search_nodes=1_000_000
        )
        times.append(time.perf_counter() - start)
        nodes.append(result.search_nodes)
    print(f"bench_matching: 3 roles x {N} candidates, 2 relations, {SEEDS} seeds")
    print(
        f"  median {statistics.median(times) * 1000:.1f} ms  "
        f"min {min(times) * 1000:.1f} ms  max {max(times) * 1000:.1f} ms"
    )
    print(f"  search nodes: median {statistics.median(nodes):.0f}, max {max(nodes)}")


if __name__ == "__main__":
    main()
