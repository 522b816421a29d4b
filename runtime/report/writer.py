"""``write_report``: project the log, draw, render thumbnails, write the folder atomically."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import structlog

from domain.chain import ChainReport
from runtime.files import write_bytes_atomic
from runtime.report import plots
from runtime.report.frames import episode_frames
from runtime.report.html import render_page, thumbnail_key
from runtime.report.thumbnails import render_thumbnails
from store.gc_pause import gc_paused

log = structlog.get_logger(__name__)

REPORT_NAME = "report.html"


@dataclass(frozen=True)
class ReportResult:
    html_path: Path
    png_paths: tuple[Path, ...]
    chain: ChainReport
    thumbnails_rendered: int


def _snapshot_folder(recorded: str | None, output_dir: str | None) -> str | None:
    if recorded is None:
        return None
    path = Path(recorded)
    if not path.is_absolute() and output_dir is not None:
        path = Path(output_dir) / path
    return str(path)


def _project(store: Any, run_id: str) -> tuple[dict[str, Any], list[SimpleNamespace]]:
    """The run report and the camera receipts, from the snapshotted ``run_report`` and
    ``forensics`` projections + their tails (not the whole log), both at the same seq (a
    concurrent append between the two is folded into the first as well)."""
    with gc_paused():
        projector = store.project(run_id, "run_report")
        forensic = store.project(run_id, "forensics")
        for event in store.iter_events(run_id, after_seq=projector.seq):
            if event.seq > forensic.seq:
                break
            projector.apply(event)
        report = projector.report(forensic)
        receipts = [
            SimpleNamespace(type="TrajectoryCommitted", payload=payload)
            for payload in projector.camera_receipts()
        ]
    return report, receipts


def write_report(
    store: Any, run_id: str, out_dir: Path, *, thumbnails: bool = True
) -> ReportResult:
    """Write ``out_dir/report.html`` and the plots as ``out_dir/<name>.png``.

    Thumbnails go to ``out_dir/thumbnails/`` and are embedded in the page as well; with
    ``thumbnails=False`` (or when rendering fails) the page says why there is none.
    """
    report, receipts = _project(store, run_id)
    chain = store.check_chain(run_id)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    drawn = {name: draw(report) for name, draw in plots.PLOTS.items()}
    png_paths = []
    for name, png in drawn.items():
        path = out_dir / f"{name}.png"
        write_bytes_atomic(path, png)
        png_paths.append(path)
    wanted = {
        thumbnail_key(a["role"], a["content_sha256"]): folder
        for a in report["assets"]
        if (folder := _snapshot_folder(a["snapshot_dir"], report["output_dir"])) is not None
    }
    thumbs: dict[str, bytes | str] = {}
    if thumbnails:
        for key, result in render_thumbnails(wanted, out_dir / "thumbnails").items():
            thumbs[key] = result.read_bytes() if isinstance(result, Path) else result
    else:
        thumbs = dict.fromkeys(wanted, "rendering skipped (--no-thumbnails)")
    output_dir = Path(report["output_dir"]) if report["output_dir"] else None
    # The frame sources read the receipts naming camera files (none: nothing to load).
    frames = episode_frames(receipts, output_dir) if receipts else {}
    page = render_page(report, chain, drawn, thumbs, frames)
    html_path = out_dir / REPORT_NAME
    write_bytes_atomic(html_path, page.encode("utf-8"))
    rendered = sum(isinstance(v, bytes) for v in thumbs.values())
    log.info("report_written", run_id=run_id, path=str(html_path), thumbnails=rendered,
             chain_ok=chain.ok)
    return ReportResult(html_path, tuple(png_paths), chain, rendered)
