"""A small prepared run of the demo task on the procedural demo catalog.

Shared by the collection tests, the crash test's child processes and the collection
benchmark, so they all exercise the same real task, assets and simulator rather than a
mock that could drift from what users run.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any


def demo_task_path() -> Path:
    return Path(str(resources.files("runtime") / "demo" / "task.yaml"))


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
) -> str:
    """Prepare the demo task into ``output_dir`` and return the new run id."""
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
    result = prepare(
        demo_task_path(), providers, cfg=cfg, output_dir=output_dir, store=store, goal=goal
    )
    return result.run_id
