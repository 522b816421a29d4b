"""Simulator throughput on the arm and the gantry, side by side in one run.

Figures: physics steps/s inside episodes vs raw mj_step on the same compiled model (per
robot; the raw figure replays the last episode's actuator targets from its initial state, so
both see the same contacts); IK solve time per waypoint (median, p95) and the share of
episode time spent in IK (arm); episodes/min of the demo task (block-040 into bin-180x140
from the demo catalog) on the arm vs the gantry.
Run: .venv/bin/python bench/bench_sim.py [episodes]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from domain.assets import PreparationContext  # noqa: E402
from runtime.assets.cache import prepare_package  # noqa: E402
from runtime.assets.demo_catalog import write_demo_catalog  # noqa: E402
from runtime.sim import TaskEnvironment, TrajectoryRecorder, checks_accept  # noqa: E402
from runtime.sim.recorder import trajectory_bytes  # noqa: E402
from tests.runtime.sim_fixtures import task_mapping  # noqa: E402

ROBOTS: dict[str, dict[str, Any] | None] = {"gantry": None, "arm": {"kind": "franka_panda"}}


def _deployments(root: Path) -> dict[str, Path]:
    packages = {p.name: p for p in write_demo_catalog(root / "catalog")}
    context = PreparationContext(cache_dir=str(root / "cache"))
    rel = {}
    for name in ("block-040", "bin-180x140"):
        asset = prepare_package(
            packages[name], candidate_id=name, locator=str(packages[name]), context=context
        )
        rel[name] = f"assets/{asset.content_sha256}/asset.catalog.json"
    out = {}
    for label, robot in ROBOTS.items():
        folder = root / f"batch_{label}"
        for path in rel.values():  # a task names only packages inside its folder
            snapshot = Path(path).parent
            shutil.copytree(root / "cache" / snapshot.name, folder / snapshot)
        mapping = task_mapping(
            {"package": rel["block-040"]}, {"package": rel["bin-180x140"]}, robot=robot
        )
        (folder / "task.yaml").write_text(yaml.safe_dump(mapping, sort_keys=False))
        out[label] = folder
    return out


def _measure(deployment: Path, episodes: int) -> dict[str, Any]:
    env = TaskEnvironment.from_deployment(deployment, settle_steps=50)
    ik = getattr(env.robot, "ik", None)
    if ik is not None:
        ik.stats.clear()
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
    ik_times = np.array(ik.stats.seconds) if ik is not None else np.zeros(0)

    # Raw physics of the very same motion: replay the last episode's actuator targets from
    # its initial state with bare mj_step, so contacts (grasp, bin) are the same as inside.
    actions = recorder.to_payload({})["actions"].numpy()
    env.reset(episodes - 1)
    model, data = env.model, env.data
    actuators = env._actuators
    t0 = time.perf_counter()
    for ctrl in actions:
        data.ctrl[actuators] = ctrl
        mujoco.mj_step(model, data, nstep=10)
    raw_wall = time.perf_counter() - t0
    raw_steps = 10 * len(actions)
    return {
        "accepted": accepted,
        "steps_per_episode": program_steps / episodes,
        "in_episode": program_steps / program_wall,
        "raw": raw_steps / raw_wall,
        "episode_wall": episode_wall,
        "ik": ik_times,
    }


def main(episodes: int = 10) -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory() as tmp:
        deployments = _deployments(Path(tmp))
        results = {label: _measure(path, episodes) for label, path in deployments.items()}
    print(f"episodes per robot: {episodes}")
    for label, r in results.items():
        ratio = r["in_episode"] / r["raw"]
        print(f"[{label}] accepted: {r['accepted']}/{episodes}  "
              f"physics steps per episode (program): {r['steps_per_episode']:.0f}")
        print(f"[{label}] steps/s inside episodes: {r['in_episode']:,.0f}  raw mj_step: "
              f"{r['raw']:,.0f}  ratio: {ratio:.2f}  (goal >= 0.7 on the arm)")
        print(f"[{label}] wall per episode: {r['episode_wall'] / episodes * 1000:.0f} ms  "
              f"episodes/min: {episodes / r['episode_wall'] * 60:,.0f}")
    ik = results["arm"]["ik"]
    if len(ik):
        share = ik.sum() / results["arm"]["episode_wall"]
        print(f"[arm] IK solves: {len(ik)}  median {np.median(ik) * 1000:.2f} ms  "
              f"p95 {np.percentile(ik, 95) * 1000:.2f} ms  share of episode time "
              f"{share * 100:.1f}%  (goal < 10%)")
    arm, gantry = results["arm"], results["gantry"]
    print(f"episodes/min arm vs gantry: {episodes / arm['episode_wall'] * 60:,.0f} vs "
          f"{episodes / gantry['episode_wall'] * 60:,.0f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
