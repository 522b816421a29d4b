"""A small prepared run of the demo task on the procedural demo catalog.

Shared by the collection tests, the crash test's child processes and the collection
benchmark, so they all exercise the same real task, assets and simulator rather than a
mock that could drift from what users run.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

GANTRY_ROBOT = "{kind: parallel_gripper, max_opening_m: 0.09}"
GANTRY_MOUNT_POSE = "position_m: [-0.09, 0.0, 0.13], look_at_m: [0.0, 0.0, -0.01]"


def demo_task_path() -> Path:
    return Path(str(resources.files("runtime") / "demo" / "task.yaml"))


def gantry_demo_task_text() -> str:
    """The demo task on the fast gantry instead of the arm, for the suites that test what
    happens around episodes (collection, resume, CLI), not the arm."""
    from runtime.sim.robots.franka_panda import FrankaPanda
    from runtime.sim.robots.parallel_gripper import ParallelGripper

    text = demo_task_path().read_text(encoding="utf-8")
    marker = "robot: {kind: franka_panda}"
    if marker not in text:
        raise ValueError(f"{demo_task_path()}: no {marker!r} line to swap for the gantry")
    # The wrist camera rides on the gantry's wrist instead of the Panda hand; the two hand
    # frames differ (the gantry's sits at the fingertips, +z up), so the whole mount changes.
    lines = []
    for line in text.replace(marker, f"robot: {GANTRY_ROBOT}").splitlines(keepends=True):
        if f"mount: {{body: {FrankaPanda.wrist_mount_body}," in line:
            indent = line[: line.index("mount:")]
            body = ParallelGripper.wrist_mount_body
            line = f"{indent}mount: {{body: {body}, {GANTRY_MOUNT_POSE}}}\n"
        lines.append(line)
    return "".join(lines)


def without_cameras(text: str) -> str:
    """The task text with its ``cameras:`` section removed (for runs that test something
    else and should not pay for rendering)."""
    import yaml

    mapping = yaml.safe_load(text)
    mapping.pop("cameras", None)
    return yaml.safe_dump(mapping, sort_keys=False)


def gantry_demo_task(directory: Path, *, cameras: bool = True) -> Path:
    """``gantry_demo_task_text()`` written into ``directory`` (without its cameras unless
    ``cameras``)."""
    text = gantry_demo_task_text()
    name = "demo_task.gantry.yaml"
    if not cameras:
        text, name = without_cameras(text), "demo_task.gantry.no_cameras.yaml"
    path = Path(directory) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_catalog(directory: Path) -> Path:
    """Write the procedural demo catalog once; return its directory."""
    from runtime.assets.demo_catalog import write_demo_catalog

    directory = Path(directory)
    if not directory.is_dir() or not any(directory.iterdir()):
        write_demo_catalog(directory)
    return directory


def prepare_demo_run(
    store: Any,
    output_dir: Path,
    catalog: Path,
    *,
    seed: int = 7,
    batches: int = 3,
    episodes_per_batch: int = 4,
    settle_steps: int = 20,
    record_trajectory: bool = True,
    goal: str = "run",
    arm: bool = False,
    cameras: bool = True,
    run_id: str | None = None,
) -> str:
    """Prepare the demo task into ``output_dir`` and return the new run id.

    ``run_id`` fixes the id (it is part of every trajectory's metadata): the same id in two
    stores gives two runs whose files can be compared byte for byte.

    ``arm=False`` runs it on the gantry (fast); ``arm=True`` on the shipped Franka arm.
    ``cameras=False`` (gantry only) drops the task's cameras.
    """
    from domain.config import CollectionConfig
    from runtime.prepare import prepare, providers_from_catalog_args

    cfg = CollectionConfig(
        seed=seed,
        max_batches=batches,
        episodes_per_batch=episodes_per_batch,
        settle_steps=settle_steps,
        record_trajectory=record_trajectory,
    )
    providers = providers_from_catalog_args([f"item={catalog}", f"bin={catalog}"])
    if arm and not cameras:
        raise ValueError("cameras=False is only offered on the gantry")
    task = demo_task_path() if arm else gantry_demo_task(
        Path(output_dir).parent, cameras=cameras
    )
    result = prepare(
        task, providers, cfg=cfg, output_dir=output_dir, store=store, goal=goal,
        run_id=run_id,
    )
    return result.run_id
