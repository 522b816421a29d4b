"""Simulator throughput: physics steps/s inside an episode vs raw mj_step, and episodes/min.

Uses real demo-catalog packages (block-040 into bin-180x140) prepared into a temp cache.
Run: .venv/bin/python bench/bench_sim.py [episodes]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import mujoco
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from domain.assets import PreparationContext  # noqa: E402
from runtime.assets.cache import prepare_package  # noqa: E402
from runtime.assets.demo_catalog import write_demo_catalog  # noqa: E402
from runtime.sim import TaskEnvironment, TrajectoryRecorder, checks_accept  # noqa: E402
from runtime.sim.recorder import trajectory_bytes  # noqa: E402
from tests.runtime.sim_fixtures import task_mapping  # noqa: E402


def _deployment(root: Path) -> Path:
    packages = {p.name: p for p in write_demo_catalog(root / "catalog")}
    context = PreparationContext(cache_dir=str(root / "cache"))
    rel = {}
    for name in ("block-040", "bin-180x140"):
        asset = prepare_package(
            packages[name], candidate_id=name, locator=str(packages[name]), context=context
        )
        rel[name] = f"../cache/{asset.content_sha256}/asset.catalog.json"
    folder = root / "batch_0000"
    folder.mkdir()
    mapping = task_mapping({"package": rel["block-040"]}, {"package": rel["bin-180x140"]})
    (folder / "task.yaml").write_text(yaml.safe_dump(mapping, sort_keys=False))
    return folder


def main(episodes: int = 30) -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory() as tmp:
        env = TaskEnvironment.from_deployment(_deployment(Path(tmp)), settle_steps=50)
        program_steps = 0
        program_wall = 0.0
        accepted = 0
        start = time.perf_counter()
        for seed in range(episodes):
            env.reset(seed)
            initial = env.run_checks(env.task.checks.initial)
            recorder = TrajectoryRecorder.for_environment(env)
            t0 = time.perf_counter()
            result = env.run_program(recorder)
            program_wall += time.perf_counter() - t0
            program_steps += result.steps
            final = env.run_checks(env.task.checks.final)
            trajectory_bytes(recorder.to_payload({"seed": seed}))
            accepted += checks_accept(initial) and result.completed and checks_accept(final)
        episode_wall = time.perf_counter() - start

        env.reset(0)
        model, data = env.model, env.data
        raw_steps = program_steps
        t0 = time.perf_counter()
        for _ in range(raw_steps // 10):
            mujoco.mj_step(model, data, nstep=10)
        raw_wall = time.perf_counter() - t0

    in_episode = program_steps / program_wall
    raw = raw_steps / raw_wall
    print(f"episodes: {episodes}  accepted: {accepted}")
    print(f"physics steps per episode (program): {program_steps / episodes:.0f}")
    print(f"steps/s inside episodes (program incl. control+recording): {in_episode:,.0f}")
    print(f"steps/s raw mj_step on the same model:                      {raw:,.0f}")
    print(f"ratio episode/raw: {in_episode / raw:.2f}  (goal >= 0.5)")
    print(
        f"wall per full episode (reset+settle+checks+program+record): "
        f"{episode_wall / episodes * 1000:.1f} ms"
    )
    print(f"episodes/min: {episodes / episode_wall * 60:,.0f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
