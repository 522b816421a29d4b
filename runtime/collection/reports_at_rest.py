"""Reports a kill left behind, brought back in line with the log by the next session.

`preparation.report.json` and `report.json` are projections written *after* the event that
ends their phase (each folds that event in), so a SIGKILL between the append and the write
leaves a complete log beside a missing report, or beside the report an earlier failed
session wrote. Nothing is lost, since the log is the truth, but the file a user opens says
something the log does not. A session that continues a run (and ``resume`` of a run already
at rest) therefore compares each report with the log's projection and rewrites the ones that
differ, under its lease; nothing is appended to the log.

The comparison streams: the collection report is as long as the episode list, so it is
checked piece by piece against the file (memory: a chunk), the way it is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import structlog

from runtime.collection.results import REPORT_NAME, print_report, write_report
from runtime.files import write_bytes_atomic
from runtime.preparation.session_outcome import REPORT_NAME as PREPARATION_REPORT_NAME
from runtime.preparation.session_outcome import report_text_of

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ReportsRestored:
    """What ``resume`` of a run at rest did: the reports it rewrote from the log."""

    run_id: str
    paths: tuple[Path, ...]


class _Differs(Exception):
    """Raised from inside a streamed projection at the first byte that differs."""


class _Comparison:
    """A ``write`` callback that checks each piece of text against the file's next bytes."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle

    def write(self, text: str) -> None:
        data = text.encode("utf-8")
        if self.handle.read(len(data)) != data:
            raise _Differs


def _file_matches(path: Path, stream: Callable[[Callable[[str], None]], None]) -> bool:
    """Whether ``path`` holds exactly the text ``stream`` produces (False if it is missing)."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return False
    with handle:
        comparison = _Comparison(handle)
        try:
            stream(comparison.write)
        except _Differs:
            return False
        return handle.read(1) == b""


def _restored(path: Path, run_id: str) -> Path:
    log.warning("report_restored", run_id=run_id, path=str(path),
                reason="the log is further than the report a previous session left")
    return path


def restore_preparation_report(
    store: Any, run_id: str, output_dir: Path, fence: Any
) -> Path | None:
    """Rewrite `preparation.report.json` if it is not the log's projection; its path if so."""
    path = output_dir / PREPARATION_REPORT_NAME
    text = report_text_of(store, run_id)
    if _file_matches(path, lambda write: write(text)):
        return None
    write_bytes_atomic(path, text.encode("utf-8"), fence=fence)
    return _restored(path, run_id)


def restore_collection_report(
    store: Any, run_id: str, output_dir: Path, fence: Any
) -> Path | None:
    """Rewrite `report.json` if it is not the log's projection; its path if so."""
    path = output_dir / REPORT_NAME
    if _file_matches(path, lambda write: print_report(store, run_id, write)):
        return None
    write_report(store, run_id, path, fence)
    return _restored(path, run_id)


def restore_reports(
    store: Any, run_id: str, output_dir: Path, fence: Any, *, collected: bool
) -> ReportsRestored:
    """Both reports of a run at rest (only the preparation one unless ``collected``)."""
    found = [restore_preparation_report(store, run_id, output_dir, fence)]
    if collected:
        found.append(restore_collection_report(store, run_id, output_dir, fence))
    return ReportsRestored(run_id, tuple(path for path in found if path is not None))
