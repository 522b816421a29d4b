"""``assetcast demo``: the whole pipeline on built-in data, in one command, with no downloads.

Folder semantics (chosen so a demo never deletes anything and never mixes with user data):
the demo root (default ``./assetcast-demo``) is marked with a ``.assetcast-demo`` file the first
time it is used. Every invocation creates a fresh ``demo-YYYYMMDD-HHMMSS-<hex>/`` inside it,
holding everything that demo wrote::

    demo-.../catalog/        the procedural asset packages (one folder each)
    demo-.../task.yaml       the built-in task (packaged as runtime/demo/task.yaml)
    demo-.../assetcast.db    the event store (SQLite) of this demo
    demo-.../run/            the run's output: cache/, batch_NNNN/, recordings/, reports
    demo-.../report/         report.html and its PNG plots (``assetcast report``)

A root that exists, is not empty and has no marker is refused: it is somebody else's folder.
Older demo folders are left alone; delete the root to clean up.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import structlog

from domain.config import CollectionConfig
from domain.errors import AssetcastInputError

log = structlog.get_logger(__name__)

DEFAULT_DEMO_ROOT = Path("assetcast-demo")
ROOT_MARKER = ".assetcast-demo"
# Seed 26's three batches show the three fates of an episode: a tile whose 5 mm clearance
# leaves the fingers no room (physics and checks reject it: the Panda's fingers meet the
# walls and the tile ends up wedged above the floor), an item too wide for the 8 cm hand (pick
# refuses it), and an accepted fit.
DEMO_CONFIG = CollectionConfig(seed=26, max_batches=3, episodes_per_batch=2, settle_steps=50)


class DemoFolderError(AssetcastInputError):
    """The demo root is not usable (a file, or a non-empty folder that is not a demo root)."""


@dataclass(frozen=True)
class DemoResult:
    run_id: str
    directory: Path
    db_url: str
    task_path: Path
    catalog_dir: Path
    output_dir: Path
    report_path: Path | None = None


def demo_task_text() -> str:
    """The built-in task file, read from the installed package data."""
    return resources.files("runtime").joinpath("demo", "task.yaml").read_text(encoding="utf-8")


def new_demo_dir(root: Path) -> Path:
    """Claim (or re-use) the demo root and create this invocation's fresh subfolder."""
    root = Path(root).absolute()
    if root.exists() and not root.is_dir():
        raise DemoFolderError(f"--out {root}: exists and is not a folder")
    if root.is_dir() and any(root.iterdir()) and not (root / ROOT_MARKER).is_file():
        raise DemoFolderError(
            f"--out {root}: folder is not empty and is not an assetcast demo folder "
            f"(no {ROOT_MARKER}); choose another --out"
        )
    root.mkdir(parents=True, exist_ok=True)
    (root / ROOT_MARKER).write_text("assetcast demo root: each demo-* folder is one demo\n")
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    directory = root / f"demo-{stamp}-{secrets.token_hex(2)}"
    directory.mkdir()
    return directory


def run_demo(
    root: Path = DEFAULT_DEMO_ROOT,
    *,
    cfg: CollectionConfig = DEMO_CONFIG,
    db: str | None = None,
    progress: bool = True,
    on_run_id: Callable[[str], None] | None = None,
    on_db_url: Callable[[str], None] | None = None,
) -> DemoResult:
    """Write catalog and task, then prepare and collect one run (goal ``run``).

    ``on_run_id`` hears the run id before the first event is appended, so an interrupted demo
    can still tell the user which run to resume; ``on_db_url`` hears which store it uses, so
    a failed demo can be checked for a recorded failure.
    """
    from runtime.assets.demo_catalog import write_demo_catalog
    from runtime.collection import collect
    from runtime.prepare import new_run_id, prepare, providers_from_catalog_args
    from runtime.taskfile import load_task
    from store.event_store import EventStore

    directory = new_demo_dir(root)
    catalog = directory / "catalog"
    packages = write_demo_catalog(catalog)
    task_path = directory / "task.yaml"
    task_path.write_text(demo_task_text(), encoding="utf-8")
    requirements = load_task(task_path).asset_requirements
    roles = sorted(requirements.roles) if requirements else []
    db_url = db or f"sqlite:///{directory / 'assetcast.db'}"
    if on_db_url is not None:
        on_db_url(db_url)
    output = directory / "run"
    log.info("demo_prepared_inputs", directory=str(directory), packages=len(packages), roles=roles)

    store = EventStore(db_url)
    providers = providers_from_catalog_args([f"{role}={catalog}" for role in roles])
    run_id = new_run_id()
    if on_run_id is not None:
        on_run_id(run_id)
    prepare(
        task_path, providers, cfg=cfg, output_dir=output, store=store, goal="run", run_id=run_id
    )
    collect(run_id, store=store, progress=progress)
    from runtime.report import write_report

    report = write_report(store, run_id, directory / "report")
    return DemoResult(run_id, directory, db_url, task_path, catalog, output, report.html_path)
