"""The argparse tree: every flag and subcommand, and which handler each subcommand calls.

Kept apart from the handlers so ``assetcast --help`` reads as one place, and so the parser's
error behaviour (one line, exit 2) is defined once for every subcommand.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn

from domain.limits import (
    DEFAULT_MAX_COLLISION_PIECES,
    DEFAULT_MAX_MESH_FACES,
    DEFAULT_MAX_MESH_VERTICES,
)
from runtime.cli.catalog_commands import (
    cmd_catalog_check,
    cmd_catalog_demo,
    cmd_catalog_import,
    cmd_catalog_missing,
)
from runtime.cli.dataset_commands import cmd_export, cmd_verify_dataset
from runtime.cli.db_command import cmd_db
from runtime.cli.episode_command import cmd_episode
from runtime.cli.exit_codes import PROG, UsageError
from runtime.cli.query_commands import (
    cmd_audit,
    cmd_events,
    cmd_forensics,
    cmd_runs,
    cmd_show,
    cmd_verify,
)
from runtime.cli.report_command import cmd_report
from runtime.cli.run_commands import cmd_collect, cmd_demo, cmd_prepare, cmd_resume, cmd_run
from runtime.cli.store_access import DB_ENV
from runtime.demo import DEMO_CONFIG
from runtime.logging import LEVELS


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (``assetcast: error: ...``) and exit 2 via main."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _common(parser: argparse.ArgumentParser, *, db: bool, top: bool) -> None:
    """Flags accepted before or after the subcommand; subparsers must not reset them."""
    default = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--log-level",
        default="info" if top else argparse.SUPPRESS,
        choices=sorted(LEVELS, key=LEVELS.__getitem__),
        help="minimum level of log lines on stderr (default: info)",
    )
    parser.add_argument(
        "--log-json",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="log JSON lines instead of key=value text",
    )
    parser.add_argument(
        "--plugin",
        metavar="MODULE",
        action="append",
        default=[] if top else argparse.SUPPRESS,
        help="import MODULE first (it may register checks and skills); repeatable; "
        "also read from $ASSETCAST_PLUGINS",
    )
    if db:
        parser.add_argument(
            "--db",
            metavar="URL",
            default=default,
            help=f"event store URL (default: ${DB_ENV} or sqlite:///assetcast.db in the cwd)",
        )


def _config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, help="base seed; batch i uses seed + i (default 0)")
    parser.add_argument("--batches", type=int, help="number of batches (asset sets), default 1")
    parser.add_argument("--candidates-per-role", type=int, help="candidates kept per role (32)")
    parser.add_argument("--max-search-nodes", type=int, help="matcher search budget (1000)")
    parser.add_argument("--settle-steps", type=int, help="physics steps after each reset (0)")
    parser.add_argument("--episodes-per-batch", type=int, help="episodes per batch (default 1)")
    _limit_flags(parser)
    parser.add_argument(
        "--no-record", action="store_true", help="judge episodes but write no trajectories"
    )


def _executor_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workers", type=int, default=1, metavar="N",
        help="run episodes on N Ray workers (a local Ray instance; needs assetcast[ray]); "
        "default 1: in this process, no Ray",
    )
    parser.add_argument(
        "--ray-address", metavar="ADDR",
        help="join an existing Ray cluster (e.g. HEAD:6379, started with `ray start --head`)",
    )
    parser.add_argument(
        "--episode-deadline", type=float, metavar="SECONDS", dest="episode_deadline",
        help="Ray: a worker stuck this long on one episode is killed and its episodes re-run "
        "elsewhere (default 900)",
    )


def _dataset_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset",
        metavar="FORMAT:PATH",
        action="append",
        help="keep a dataset up to date as batches finish: lerobot:DIR or robomimic:FILE "
        "(repeatable)",
    )


def _keep_rejected_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--keep-rejected", action="store_true",
        help="keep rejected episodes' trajectories (and camera files) under rejected/",
    )


def _limit_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-mesh-faces", type=int,
        help=f"faces one mesh may have (default {DEFAULT_MAX_MESH_FACES})",
    )
    parser.add_argument(
        "--max-mesh-vertices", type=int,
        help=f"vertices one mesh may have (default {DEFAULT_MAX_MESH_VERTICES})",
    )
    parser.add_argument(
        "--max-collision-pieces", type=int,
        help="convex pieces per asset before it collapses to one hull "
        f"(default {DEFAULT_MAX_COLLISION_PIECES})",
    )


def _import_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source", metavar="SOURCE", nargs="+",
        help="mesh or URDF file(s) to import, one package each",
    )
    parser.add_argument("--out", metavar="CATALOG", required=True, help="catalog folder")
    parser.add_argument(
        "--id",
        help="asset id, also the package folder name (one source; default: the file's name "
        "without extension)",
    )
    parser.add_argument("--category", required=True)
    parser.add_argument("--capability", action="append", metavar="NAME", help="repeatable")
    parser.add_argument("--attribute", action="append", metavar="K=V", help="repeatable")
    parser.add_argument(
        "--up", choices=["y", "z"],
        help="the source's up axis (default: glTF/GLB y by specification, others z)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiply coordinates (1)")
    parser.add_argument(
        "--centre", choices=["bbox", "footprint"], default="bbox",
        help="XY origin: the bounding box's centre, or the centre of the mesh's lowest slab",
    )
    parser.add_argument(
        "--container", action="store_true",
        help="estimate container_region: the open top's interior cavity, by ray casts",
    )
    parser.add_argument(
        "--support", action="store_true", help="estimate support_region on the flat top"
    )
    parser.add_argument(
        "--pouring", action="store_true",
        help="estimate provenance.pouring (mouth/opening radius) from the inner rim",
    )
    parser.add_argument("--mass", type=float, metavar="KG", help="the asset's mass")
    parser.add_argument(
        "--density", type=float, metavar="KG_M3",
        help="density times the mesh volume gives the mass (default: the task's density)",
    )
    parser.add_argument(
        "--friction", metavar="S[,T[,R]]",
        help="sliding[,torsional[,rolling]] friction (default: the simulator's)",
    )
    parser.add_argument(
        "--drop-missing-references", action="store_true",
        help="remove references to missing MTL/texture files (recorded in provenance)",
    )
    _limit_flags(parser)


def _prepare_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", metavar="TASK", help="task.yaml")
    parser.add_argument(
        "--catalog",
        metavar="ROLE=DIR",
        action="append",
        required=True,
        help="asset catalog directory for a role (repeat per role)",
    )
    parser.add_argument("--out", metavar="DIR", required=True, help="run output directory")
    _config_flags(parser)


def _render_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--render-backend",
        choices=["auto", "egl", "osmesa"],
        help="offscreen OpenGL backend for cameras (default: $ASSETCAST_RENDER_BACKEND, "
        "$MUJOCO_GL, else EGL then OSMesa)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Event-sourced robot demonstration collection across many object assets.",
    )
    _common(parser, db=True, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def command(name: str, handler: Callable[[argparse.Namespace], int], help: str, *,
                db: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        _common(p, db=db, top=False)
        p.set_defaults(handler=handler)
        return p

    p = command("demo", cmd_demo, "write the demo catalog and task, then prepare and collect")
    p.add_argument("--out", metavar="DIR", help="demo root (default ./assetcast-demo)")
    demo = DEMO_CONFIG
    p.add_argument(
        "--batches", type=int, default=demo.max_batches,
        help=f"batches (default {demo.max_batches})",
    )
    p.add_argument(
        "--episodes-per-batch", type=int, default=demo.episodes_per_batch,
        help=f"episodes (default {demo.episodes_per_batch})",
    )
    p.add_argument(
        "--settle-steps", type=int, default=demo.settle_steps,
        help=f"settle steps (default {demo.settle_steps})",
    )
    p.add_argument(
        "--seed", type=int, default=demo.seed,
        help=f"base seed (default {demo.seed}: its first batches include a physics rejection)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _render_flag(p)

    p = command("catalog", cmd_catalog_missing, "procedural demo catalog; check packages", db=False)
    catalog = p.add_subparsers(dest="catalog_command", metavar="ACTION", parser_class=_Parser)
    catalog.required = True
    c = catalog.add_parser("demo", help="write the procedural demo catalog into DIR")
    _common(c, db=False, top=False)
    c.add_argument("dir", metavar="DIR")
    c.set_defaults(handler=cmd_catalog_demo)
    c = catalog.add_parser("check", help="validate every package in DIR (exit 2 if any fails)")
    _common(c, db=False, top=False)
    c.add_argument("dir", metavar="DIR")
    _limit_flags(c)
    c.set_defaults(handler=cmd_catalog_check)
    c = catalog.add_parser(
        "import",
        help="turn a mesh (OBJ/STL/PLY/GLB/glTF) or a URDF (links joined by fixed joints) "
        "into a package",
    )
    _common(c, db=False, top=False)
    _import_flags(c)
    c.set_defaults(handler=cmd_catalog_import)

    p = command("prepare", cmd_prepare, "acquire candidates, match asset sets, write deployments")
    _prepare_flags(p)
    _render_flag(p)

    p = command("collect", cmd_collect, "collect episodes for a prepared run")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--episodes-per-batch", type=int, help="override the run's episodes per batch")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _executor_flags(p)
    _keep_rejected_flag(p)
    _dataset_flag(p)
    _render_flag(p)

    p = command("run", cmd_run, "prepare, then collect (resume finishes both)")
    _prepare_flags(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _executor_flags(p)
    _keep_rejected_flag(p)
    _dataset_flag(p)
    _render_flag(p)

    p = command("resume", cmd_resume, "finish what a failed or interrupted run set out to do")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _executor_flags(p)
    _keep_rejected_flag(p)
    p.add_argument(
        "--repair", action="store_true",
        help="first re-run every episode whose committed file is missing or corrupt and "
        "restore it if it has the logged SHA-256",
    )
    _dataset_flag(p)
    _render_flag(p)

    p = command("runs", cmd_runs, "list runs")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")

    p = command("show", cmd_show, "summary of one run (--json: its report)")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--json", action="store_true", help="print the run's JSON report")

    p = command("events", cmd_events, "the event log of one run")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--type", action="append", metavar="T", help="only events of type T (repeat)")
    p.add_argument("--json", action="store_true", help="JSON lines with full payloads")

    p = command("audit", cmd_audit, "per asset: runs, batches, episodes and rejections")
    p.add_argument("--json", action="store_true", help="JSON report")

    p = command("forensics", cmd_forensics, "what happened to a run: sessions, crash, failure")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--json", action="store_true", help="JSON report")

    p = command(
        "verify", cmd_verify,
        "re-walk the hash chain, re-hash trajectories, deployments and snapshots (exit 1)",
    )
    p.add_argument("run_id", metavar="RUN", nargs="?")
    p.add_argument("--all", action="store_true", help="verify every run in the store")
    p.add_argument(
        "--head", metavar="HASH",
        help="a head hash noted earlier: the run's chain must contain it",
    )
    p.add_argument(
        "--dataset", metavar="PATH", action="append",
        help="also check that this dataset is the exact projection of RUN's log (repeatable)",
    )

    p = command("report", cmd_report, "write report.html and PNG plots of one run into DIR")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--out", metavar="DIR", required=True, help="folder for report.html")
    p.add_argument(
        "--no-thumbnails", action="store_true", help="do not render asset thumbnails"
    )

    p = command("export", cmd_export, "write the committed episodes of runs as a dataset")
    p.add_argument("run_ids", metavar="RUN", nargs="+", help="runs of one task, merged in order")
    p.add_argument("--format", required=True, choices=["lerobot", "robomimic"])
    p.add_argument("--out", metavar="PATH", required=True,
                   help="dataset directory (lerobot) or .hdf5 file (robomimic)")

    p = command("verify-dataset", cmd_verify_dataset,
                "check a dataset against the log it projects (exit 1 naming each bad file)")
    p.add_argument("path", metavar="PATH")

    p = command("episode", cmd_episode, "contact sheet and camera files of one episode")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("batch", metavar="BATCH", type=int)
    p.add_argument("episode", metavar="EPISODE", type=int)
    p.add_argument("--frames", metavar="DIR", required=True, help="folder to write into")

    p = command("db", cmd_db, "event store schema: upgrade | current | rebuild-snapshots")
    p.add_argument("action", choices=["upgrade", "current", "rebuild-snapshots"])
    p.add_argument(
        "run_ids", metavar="RUN", nargs="*",
        help="rebuild-snapshots: only these runs (default: every run)",
    )
    return parser
