"""Checking a dataset against the log that it claims to project.

Three questions, every answer collected (not raised), each naming the file at fault:
is every file on disk the one the log's latest `DatasetUpdated` for this path recorded
(changed, missing, extra)? Is every exported episode still committed in its run's log with the
same trajectory? And do the log's episodes, written again now, give exactly the recorded
files? So an edited parquet, a dropped video or a dataset claiming an episode the log lacks
are all found.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.export.dataset import (
    DatasetSpec,
    current_files,
    manifest_of,
    read_manifest,
    render,
)
from runtime.export.episodes import dataset_source, run_source
from runtime.export.errors import NotADataset


@dataclass
class DatasetCheck:
    path: Path
    format: str
    files_checked: int = 0
    episodes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def spec_for_path(path: Path | str) -> DatasetSpec:
    """The dataset at ``path``: a link or folder is LeRobot, a file robomimic."""
    absolute = Path(os.path.abspath(path))
    if absolute.is_symlink() or absolute.is_dir():
        return DatasetSpec("lerobot", absolute)
    if absolute.is_file():
        return DatasetSpec("robomimic", absolute)
    raise NotADataset(f"{absolute} does not exist")


def _compare(found: dict[str, str], expected: dict[str, str], what: str) -> list[str]:
    problems = []
    for name in sorted(set(found) | set(expected)):
        if name not in found:
            problems.append(f"{name}: missing ({what} has it)")
        elif name not in expected:
            problems.append(f"{name}: not part of {what}")
        elif found[name] != expected[name]:
            problems.append(f"{name}: differs from {what}")
    return problems


def verify_run_dataset(store: Any, run_id: str, path: Path | str) -> DatasetCheck:
    """:func:`verify_dataset`, plus: the dataset projects ``run_id``, and the version the
    run's log recorded last is this run's whole projection (no committed episode of the run
    is missing from it, e.g. because a live update never happened)."""
    check = verify_dataset(store, path)
    manifest = read_manifest(spec_for_path(path))
    if manifest is None or run_id not in manifest["runs"]:
        check.problems.append(f"the dataset does not project run {run_id}")
        return check
    events = store.read(run_id)
    updates = [
        e for e in events if e.type == "DatasetUpdated" and e.payload["path"] == str(check.path)
    ]
    if not updates:
        return check  # verify_dataset already named the missing record
    covered = {
        (e["batch_index"], e["episode_index"], e["trajectory_sha256"])
        for e in updates[-1].payload["episodes"]
    }
    missing = [
        (ep.provenance.batch_index, ep.provenance.episode_index)
        for ep in run_source(run_id, events).episodes
        if (ep.provenance.batch_index, ep.provenance.episode_index,
            ep.provenance.trajectory_sha256) not in covered
    ]
    if missing:
        shown = ", ".join(f"batch {b} episode {e}" for b, e in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        check.problems.append(
            f"run {run_id}: {len(missing)} committed episode(s) are not in the dataset "
            f"(log position {updates[-1].payload['log_position']} was the last exported): "
            f"{shown}{more}"
        )
    return check


def verify_dataset(store: Any, path: Path | str) -> DatasetCheck:
    spec = spec_for_path(path)
    manifest = read_manifest(spec)
    if manifest is None:
        raise NotADataset(f"{spec.path} is not an assetcast dataset")
    check = DatasetCheck(spec.path, spec.format, episodes=len(manifest["episodes"]))
    found = current_files(spec)
    check.files_checked = len(found)
    recorded: dict[str, Any] | None = None
    runs = []
    for run_id in manifest["runs"]:
        events = store.read(run_id)
        if not events:
            check.problems.append(f"run {run_id} named by the dataset is not in the store")
            continue
        updates = [
            e for e in events if e.type == "DatasetUpdated" and e.payload["path"] == str(spec.path)
        ]
        if not updates:
            check.problems.append(f"run {run_id}: the log records no update of {spec.path}")
            continue
        latest = updates[-1].payload
        if recorded is None or latest["digest"] != recorded["digest"]:
            if recorded is not None:
                check.problems.append(
                    f"run {run_id}: the log's latest version of this dataset is {latest['digest']}"
                    f", another run's is {recorded['digest']}"
                )
            recorded = latest
        # The episodes the recorded version covered, exactly as the log had them then.
        covered = [e for e in events if e.seq <= latest["log_position"]]
        runs.append(run_source(run_id, covered))
    if recorded is None:
        return check
    check.problems += _compare(found, recorded["files"], "the version the log recorded")
    expected_manifest = None
    try:
        source = dataset_source(runs)
        expected_manifest = manifest_of(source, spec.format)
    except Exception as error:  # a refusal here is itself the finding
        check.problems.append(f"the log's episodes do not form this dataset: {error}")
    if expected_manifest is not None:
        if expected_manifest["episodes"] != manifest["episodes"]:
            check.problems.append(
                "meta: the dataset lists other episodes than the log committed up to the "
                "recorded position"
            )
        with tempfile.TemporaryDirectory(prefix=".assetcast-verify-") as scratch:
            try:
                rebuilt, _totals = render(
                    spec.format, source, expected_manifest, Path(scratch),
                    file_name=spec.path.name,
                )
            except Exception as error:
                check.problems.append(f"the log's episodes cannot be exported again: {error}")
            else:
                check.problems += _compare(
                    rebuilt, recorded["files"], "what the log's episodes produce"
                )
    return check
