"""Commands for training datasets: `export` (LeRobot / robomimic) and `verify-dataset`."""

from __future__ import annotations

import argparse
from typing import Any

from runtime.cli.exit_codes import EXIT_OK, EXIT_RUN_FAILED, UsageError
from runtime.cli.output import out
from runtime.cli.store_access import open_for_reading, open_for_writing, require_run


def dataset_specs(values: list[str] | None) -> list:
    """``--dataset FORMAT:PATH`` values, parsed and checked before any event is appended."""
    from runtime.export.dataset import DatasetSpec, check_target

    specs = [DatasetSpec.parse(v) for v in values or []]
    paths = [s.path for s in specs]
    if len(set(paths)) != len(paths):
        raise UsageError("--dataset: the same path is given twice")
    for spec in specs:
        check_target(spec)
    if specs:
        from runtime.export.live_builders import requested_builder

        requested_builder()  # $ASSETCAST_LIVE_BUILDER names a builder
    return specs


def cmd_export(args: argparse.Namespace) -> int:
    from runtime.export import DatasetSpec, export_runs

    spec = DatasetSpec.parse(f"{args.format}:{args.out}", flag="--out")
    store = open_for_writing(args)
    for run_id in args.run_ids:
        require_run(store, run_id)
    version = export_runs(store, args.run_ids, spec)
    state = "written" if version.written else "unchanged"
    out(
        f"{spec.format} dataset {spec.path}: {version.total_episodes} episode(s), "
        f"{version.total_frames} frame(s), {len(version.files)} file(s), {state}"
    )
    out(f"digest {version.digest}")
    return EXIT_OK


def cmd_verify_dataset(args: argparse.Namespace) -> int:
    from runtime.export import verify_dataset

    store = open_for_reading(args)
    check = verify_dataset(store, args.path)
    return EXIT_OK if print_dataset_check(check) else EXIT_RUN_FAILED


def verify_run_datasets(store: Any, run_id: str, paths: list[str]) -> bool:
    """`verify RUN --dataset PATH`: each dataset is the exact projection of RUN's log."""
    from runtime.export.verify import verify_run_dataset

    return all([print_dataset_check(verify_run_dataset(store, run_id, p)) for p in paths])


def require_datasets(paths: list[str]) -> None:
    """Refuse (bad input, before anything is checked) a path that holds no assetcast dataset."""
    from runtime.export.dataset import read_manifest
    from runtime.export.errors import NotADataset
    from runtime.export.verify import spec_for_path

    for path in paths:
        spec = spec_for_path(path)
        if read_manifest(spec) is None:
            raise NotADataset(f"{spec.path} is not an assetcast dataset")


def print_dataset_check(check: Any) -> bool:
    """Print one dataset check (each problem, then the verdict); whether it passed."""
    for problem in check.problems:
        out(f"problem: {problem}")
    verdict = "ok" if check.ok else f"{len(check.problems)} problem(s)"
    out(
        f"{check.format} dataset {check.path}: {verdict} ({check.files_checked} files, "
        f"{check.episodes} episodes checked)"
    )
    return bool(check.ok)
