"""Commands that create or continue a run: prepare, run, collect, resume, demo.

They share one rule: everything the user typed is validated before the first event is
appended, so bad input exits 2 and leaves the store untouched. Once a run exists, an
unexpected error is that run's failure (exit 1), which is why ``entry_point`` needs
``RUN_HANDLERS``; ``args.run_start_version`` (0 for a new run) tells it where this
command's own events begin, so it can check whether the failure was recorded.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import structlog

from domain.errors import ConfigError
from runtime.cli.exit_codes import EXIT_OK, UsageError
from runtime.cli.output import out, out_block
from runtime.cli.store_access import open_for_writing, open_store, read_run, require_run

log = structlog.get_logger(__name__)
T = TypeVar("T")

# CollectionConfig field -> the flag that sets it (for error messages and parsing).
CONFIG_FLAGS: dict[str, str] = {
    "seed": "--seed",
    "max_batches": "--batches",
    "episodes_per_batch": "--episodes-per-batch",
    "candidates_per_role": "--candidates-per-role",
    "max_search_nodes": "--max-search-nodes",
    "settle_steps": "--settle-steps",
    "max_mesh_faces": "--max-mesh-faces",
    "max_mesh_vertices": "--max-mesh-vertices",
    "max_collision_pieces": "--max-collision-pieces",
}


def collection_config(args: argparse.Namespace) -> Any:
    """A CollectionConfig from the flags given; a bad value names its flag."""
    from domain.config import CollectionConfig

    values: dict[str, Any] = {}
    for field_name, flag in CONFIG_FLAGS.items():
        value = getattr(args, flag[2:].replace("-", "_"), None)
        if value is not None:
            values[field_name] = value
    values["record_trajectory"] = not getattr(args, "no_record", False)
    try:
        return CollectionConfig(**values)
    except ConfigError as error:
        flag = CONFIG_FLAGS.get(error.path, error.path)
        detail = str(error).removeprefix(f"{error.path}: ")
        raise ConfigError(flag, detail) from None


def apply_render_backend(args: argparse.Namespace) -> None:
    """``--render-backend`` wins over the environment for this process (and its children)."""
    choice = getattr(args, "render_backend", None)
    if choice:
        import os

        from runtime.sim.cameras.backend import BACKEND_ENV

        os.environ[BACKEND_ENV] = choice


def _prepare(args: argparse.Namespace, goal: str) -> Any:
    """Validate everything (task, catalogs, flags) before the first event is appended."""
    from runtime.prepare import new_run_id, prepare, providers_from_catalog_args
    from runtime.taskfile import load_task

    cfg = collection_config(args)
    task = load_task(args.task)  # task errors before the database is even opened
    from runtime.assets.entity_packages import check_entity_packages, entity_package_dirs

    # Entity packages are contained and verified before any preflight reads them.
    check_entity_packages(entity_package_dirs(task, Path(args.task).resolve()), cfg.mesh_limits)
    from runtime.sim.robots import check_reach

    check_reach(task, source=str(args.task))  # an entity out of the robot's reach is bad input
    from runtime.sim.registry import unregistered_message, unregistered_names

    # A prepared run that names a check or skill nobody registered can never be collected.
    missing = unregistered_names(task)
    if missing:
        raise UsageError(f"{args.task}: {unregistered_message(missing)}")
    providers = providers_from_catalog_args(args.catalog)
    if task.cameras and cfg.record_trajectory:
        from runtime.sim.cameras.rig import check_task_cameras

        apply_render_backend(args)
        check_task_cameras(task, Path(args.task).parent, source=str(args.task))
    store = open_for_writing(args, create=True)
    run_id = new_run_id()
    args.run_id, args.run_start_version = run_id, 0
    log.info("run_starting", run_id=run_id, goal=goal, task=str(args.task))
    from runtime.preparation.errors import PreparationFailed

    try:
        result = prepare(
            args.task,
            providers,
            cfg=cfg,
            output_dir=Path(args.out),
            store=store,
            goal=goal,
            run_id=run_id,
        )
    except PreparationFailed:
        _print_role_summaries(store, run_id)  # why no asset set was found starts here
        raise
    return store, result


def _print_role_summaries(store: Any, run_id: str) -> None:
    """Per role: candidates seen, prepared, rejected and the top rejection reasons."""
    from runtime.preparation.summary import role_summaries, summary_lines

    try:
        summaries = role_summaries(store.read(run_id))
    except Exception as error:  # noqa: BLE001 - a summary must not hide the real outcome
        log.warning("prepare.summary_unavailable", run_id=run_id, error=str(error))
        return
    for summary in summaries:
        log.info(
            "prepare.role_summary", run_id=run_id, role=summary.role, saw=summary.listed,
            limit=summary.limit, prepared=summary.prepared, rejected=summary.rejected,
            top_reasons=dict(summary.top_reasons()),
        )
    for line in summary_lines(summaries):
        out(line)


def _print_prepared(result: Any, store: Any) -> None:
    out(f"run {result.run_id}: {len(result.deployments)} deployment(s)")
    _print_role_summaries(store, result.run_id)
    for deployment in result.deployments:
        out(f"  batch {deployment.batch_index:04d}  {deployment.asset_set_id[:16]}  "
            f"{deployment.path}")
    out(f"preparation report: {result.report_path}")


def _print_collected(result: Any) -> None:
    accepted = sum(e.accepted for b in result.batches for e in b.episodes)
    attempted = sum(len(b.episodes) for b in result.batches)
    out(f"run {result.run_id}: {accepted}/{attempted} episodes accepted")
    out(f"report: {result.report_path}")


def cmd_prepare(args: argparse.Namespace) -> int:
    store, result = _prepare(args, "prepare")
    _print_prepared(result, store)
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from runtime.cli.dataset_commands import dataset_specs
    from runtime.collection import collect

    datasets = dataset_specs(args.dataset)
    executor = executor_options(args)
    from runtime.collection.executors.options import ExecutorOptions

    # Ray up before preparing: an unreachable cluster is exit 2, with nothing recorded.
    with ExecutorOptions(**executor).connected():
        store, prepared = _prepare(args, "run")
        _print_prepared(prepared, store)
        result = collect(
            prepared.run_id, store=store, progress=not args.no_progress, datasets=datasets,
            **executor,
            keep_rejected=args.keep_rejected,
        )
    _print_collected(result)
    return EXIT_OK


def cmd_collect(args: argparse.Namespace) -> int:
    from runtime.cli.dataset_commands import dataset_specs
    from runtime.collection import collect

    if args.episodes_per_batch is not None and args.episodes_per_batch < 1:
        raise UsageError("--episodes-per-batch: must be >= 1")
    datasets = dataset_specs(args.dataset)
    executor = executor_options(args)
    apply_render_backend(args)
    store = open_for_writing(args)
    require_intact_chain(store, args.run_id)
    args.run_start_version = require_run(store, args.run_id)
    result = collect(
        args.run_id,
        store=store,
        episodes_per_batch=args.episodes_per_batch,
        progress=not args.no_progress,
        datasets=datasets,
        **executor,
        keep_rejected=args.keep_rejected,
    )
    _print_collected(result)
    return EXIT_OK


def cmd_resume(args: argparse.Namespace) -> int:
    from runtime.cli.dataset_commands import dataset_specs
    from runtime.resume import ReportsRestored, resume, verify_run_inputs

    datasets = dataset_specs(args.dataset)
    executor = executor_options(args)
    apply_render_backend(args)
    store = open_for_writing(args)
    # The chain and the inputs are checked here once; resume (and its repair) trust this.
    verified = checked_before_folding(store, args.run_id, verify_run_inputs)
    args.run_start_version = require_run(store, args.run_id)
    result = resume(
        args.run_id, store=store, progress=not args.no_progress, datasets=datasets,
        **executor,
        keep_rejected=args.keep_rejected,
        repair=args.repair,
        verified=verified,
        on_repaired=_print_repaired,
    )
    if hasattr(result, "batches"):
        _print_collected(result)
    elif hasattr(result, "deployments"):
        _print_prepared(result, store)
    elif isinstance(result, ReportsRestored):
        for path in result.paths:
            out(f"run {result.run_id}: rewrote {path} from the log (a kill had left it stale)")
    return EXIT_OK


def _print_repaired(repaired: Any) -> None:
    """What ``--repair`` restored, said once its `CommittedFilesRepaired` is in the log."""
    for episode in repaired.restored:
        for path in episode.paths:
            out(
                f"restored batch {episode.batch_index} episode {episode.episode_index}: "
                f"{path} (SHA-256 as logged)"
            )
    if not repaired.restored:
        out(f"run {repaired.run_id}: every committed file is intact; nothing to repair")


def executor_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--workers`` / ``--ray-address``, checked before anything is recorded (exit 2)."""
    from runtime.collection.executors.options import ExecutorOptions

    options = ExecutorOptions(args.workers, args.ray_address, args.episode_deadline).check()
    return {
        "workers": options.workers,
        "ray_address": options.ray_address,
        "episode_deadline_s": options.episode_deadline_s,
    }


def require_intact_chain(store: Any, run_id: str) -> None:
    """Refuse (exit 2) to continue a run whose chain is broken, before even folding its log
    (a removed event would otherwise surface as a confusing fold error)."""
    checked_before_folding(store, run_id, lambda run, s: s.require_intact_chain(run))


def checked_before_folding(store: Any, run_id: str, check: Callable[[str, Any], T]) -> T:
    """``check(run_id, store)`` (one that starts with the chain), an unknown run refused as
    every command refuses one."""
    from domain.errors import UnknownRun

    try:
        return check(run_id, store)
    except UnknownRun:
        require_run(store, run_id)
        raise


def cmd_demo(args: argparse.Namespace) -> int:
    from runtime.cli.batch_table import batch_table
    from runtime.demo import DEFAULT_DEMO_ROOT, run_demo
    from store.projections.audit import run_summary

    apply_render_backend(args)
    result = run_demo(
        Path(args.out) if args.out else DEFAULT_DEMO_ROOT,
        cfg=collection_config(args),
        db=getattr(args, "db", None),
        progress=not args.no_progress,
        on_run_id=lambda run_id: vars(args).update(run_id=run_id, run_start_version=0),
        on_db_url=lambda url: setattr(args, "run_db_url", url),
    )
    store = open_store(result.db_url, read_only=True)
    events = read_run(store, result.run_id)
    out(f"demo run {result.run_id} in {result.directory}")
    out(f"run output folder: {result.output_dir}")
    out_block(batch_table(events))
    summary = run_summary(result.run_id, events)
    out(
        f"{summary['episodes_accepted']}/{summary['episodes_attempted']} episodes accepted; "
        f"state {summary['state']}"
    )
    out(f"inspect: assetcast --db {result.db_url} show {result.run_id}")
    if result.report_path is not None:
        out(f"report: {result.report_path}")
    return EXIT_OK


# Handlers whose unexpected errors (once a run id exists) are reported as that run's failure.
RUN_HANDLERS: set[Callable[[argparse.Namespace], int]] = {
    cmd_prepare, cmd_run, cmd_collect, cmd_resume, cmd_demo,
}
