"""What the particles of a pour cost: one pour episode's program (gantry, demo bottle with a
15 mm mouth into the 50 mm cup) with the source filled vs the same program with an empty
source, alternating, in one process. Figures: CPU seconds per program and the ratio, plus
the poured fraction of the filled runs.

Run: ``.venv/bin/python bench/bench_pour.py`` (prints figures; not part of pytest).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from domain.assets import PreparationContext  # noqa: E402
from runtime.assets import cache, demo_catalog  # noqa: E402
from runtime.sim import TaskEnvironment  # noqa: E402
from runtime.sim import environment as environment_module  # noqa: E402
from tests.runtime.sim_fixtures import task_mapping  # noqa: E402

REPEATS = 3


def _deployment(root: Path) -> Path:
    context = PreparationContext(cache_dir=str(root / "cache"))
    relpaths = {}
    for package in demo_catalog.write_demo_catalog(root / "catalog"):
        if package.name in ("bottle-mouth-r015", "cup-r050"):
            asset = cache.prepare_package(
                package, candidate_id=package.name, locator=str(package), context=context
            )
            relpaths[package.name] = f"cache/{asset.content_sha256}/asset.catalog.json"
    mapping = task_mapping(
        {"package": relpaths["bottle-mouth-r015"]},
        {"package": relpaths["cup-r050"]},
        program=[
            {"skill": "pick", "object": "item"},
            {"skill": "pour", "object": "item", "target": "bin"},
        ],
        final_checks=[
            {"check": "poured_fraction", "source": "item", "target": "bin", "min": 0.8}
        ],
    )
    (root / "task.yaml").write_text(yaml.safe_dump(mapping, sort_keys=False))
    return root


def _program_seconds(folder: Path, filled: bool, seed: int) -> tuple[float, int, str]:
    real = environment_module.particle_sets
    if not filled:
        environment_module.particle_sets = lambda task, geometries: {}
    try:
        env = TaskEnvironment.from_deployment(folder, settle_steps=50)
    finally:
        environment_module.particle_sets = real
    env.reset(seed)
    started = time.process_time()
    program = env.run_program(None)
    seconds = time.process_time() - started
    detail = env.run_checks(env.task.checks.final)[0].detail if filled else ""
    return seconds, program.steps, detail


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-pour-") as tmp:
        folder = _deployment(Path(tmp))
        timings: dict[bool, list[float]] = {True: [], False: []}
        details = []
        for seed in range(REPEATS):
            for filled in (True, False):
                seconds, steps, detail = _program_seconds(folder, filled, seed)
                timings[filled].append(seconds)
                if filled:
                    details.append(detail)
        filled, empty = statistics.median(timings[True]), statistics.median(timings[False])
        print(json.dumps({
            "program_cpu_s_filled_median": round(filled, 3),
            "program_cpu_s_empty_median": round(empty, 3),
            "particle_cost_ratio": round(filled / empty, 2),
            "poured": details,
        }, indent=2))


if __name__ == "__main__":
    main()
