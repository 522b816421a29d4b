"""Which committed files a repair must rebuild: every one checked against its receipt, once.

A committed file is damaged when it is missing, or its size or SHA-256 differs from its
`TrajectoryCommitted` receipt (trajectories and camera files alike). What was found in its
place is kept (size and digest), so the repair's event can say what it replaced. The scan
hashes each file at most once; once the damaged ones are restored, every committed file is
verified, so the resume that follows does not hash them again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.collection.plan import CollectionPlan
from runtime.collection.recordings import committed_files, from_log_path
from runtime.files import file_sha256


@dataclass(frozen=True)
class Damage:
    """One committed file that does not match its receipt."""

    what: str  # "trajectory" or "camera file (<camera> <modality>)"
    entry: Mapping[str, Any]  # its receipt: path (as logged), bytes, sha256
    path: Path
    found: tuple[int, str] | None  # (bytes, SHA-256) of what was there; None: missing


@dataclass(frozen=True)
class RepairScan:
    """Every committed file of a plan, checked once: what is damaged, by episode."""

    damaged: dict[tuple[int, int], list[Damage]]
    files_checked: int


def _damage(what: str, entry: Mapping[str, Any], path: Path) -> Damage | None:
    """``path`` against its receipt, hashing it at most once."""
    if not path.is_file():
        return Damage(what, entry, path, None)
    size = path.stat().st_size
    digest = file_sha256(path)
    if size == int(entry["bytes"]) and digest == entry["sha256"]:
        return None
    return Damage(what, entry, path, (size, digest))


def scan_committed(plan: CollectionPlan) -> RepairScan:
    """Committed episodes with a missing or corrupt file (every committed file checked)."""
    found: dict[tuple[int, int], list[Damage]] = {}
    checked = 0
    for key, receipt in sorted(plan.committed().items()):
        for what, entry in committed_files(receipt):
            checked += 1
            damage = _damage(what, entry, from_log_path(plan.output_dir, str(entry["path"])))
            if damage is not None:
                found.setdefault(key, []).append(damage)
    return RepairScan(found, checked)
