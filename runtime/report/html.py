"""The report page: one HTML file with inline CSS and every image as a data URI.

A Content-Security-Policy of ``default-src 'none'`` (images: ``data:`` only, styles:
inline only) makes the browser itself refuse any fetch, so the page cannot depend on the
network even by mistake. Every number is written from the projection, and the cells that
tests compare carry ``data-*`` attributes naming what they hold.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from html import escape
from typing import Any

from domain.chain import ChainReport
from runtime.report.plots import STAGE_LABELS
from store.projections.run_report import PHASES, STAGES

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#222}
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left;font-size:13px}th{background:#f3f5f7}code{font-size:12px}
.ok{color:#2e7d32;font-weight:600}.broken{color:#c62828;font-weight:600}
.plot{max-width:100%}.sets{display:flex;flex-wrap:wrap;gap:12px}
.asset{border:1px solid #ddd;padding:6px;width:250px;font-size:12px}
.unavailable{color:#8a6d3b;background:#fcf8e3;padding:6px}
.episode-frames{border:1px solid #ddd;padding:6px;font-size:12px}.frame{max-width:100%}
"""


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _img(png: bytes, alt: str, cls: str = "plot") -> str:
    return f'<img class="{cls}" alt="{escape(alt)}" src="{data_uri(png)}">'


def _cell(value: Any, **data: Any) -> str:
    attrs = "".join(f' data-{k.replace("_", "-")}="{escape(str(v))}"' for k, v in data.items())
    return f"<td{attrs}>{escape('' if value is None else str(value))}</td>"


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _chain_block(chain: ChainReport) -> str:
    if chain.ok:
        status = f'<span class="ok" id="chain-status">hash chain ok</span> ({chain.events} events)'
    else:
        status = (f'<span class="broken" id="chain-status">hash chain broken</span>: '
                  f"{escape(str(chain.problem))}")
    head = escape(chain.stored_head or "none")
    return (f"<p>{status}<br>head hash: <code id=\"head-hash\">{head}</code> "
            "(note it: <code>assetcast verify RUN --head HASH</code> proves this run, files "
            "included, unchanged since)</p>")


def _batches(report: Mapping[str, Any], png: bytes) -> str:
    rows = "".join(
        f"<tr>{_cell(b['batch_index'])}{_cell(b['asset_set_id'][:16])}"
        f"{_cell(b['accepted'], batch=b['batch_index'], field='accepted')}"
        f"{_cell(b['attempted'], batch=b['batch_index'], field='attempted')}</tr>"
        for b in report["batches"]
    )
    return (f"<h2>Batches</h2><table><tr><th>batch</th><th>asset set</th><th>accepted</th>"
            f"<th>attempted</th></tr>{rows}</table>{_img(png, 'accepted per batch')}")


def _assets(report: Mapping[str, Any], png: bytes) -> str:
    rows = "".join(
        f"<tr>{_cell(a['role'])}{_cell(a['asset_id'])}{_cell(a['content_sha256'][:12])}"
        f"{_cell(', '.join(str(i) for i in a['batches']))}"
        f"{_cell(a['accepted'], asset=a['content_sha256'], role=a['role'], field='accepted')}"
        f"{_cell(a['attempted'], asset=a['content_sha256'], role=a['role'], field='attempted')}"
        "</tr>"
        for a in report["assets"]
    )
    return (f"<h2>Assets</h2><table><tr><th>role</th><th>asset</th><th>sha256</th>"
            f"<th>in batches</th><th>accepted</th><th>attempted</th></tr>{rows}</table>"
            f"{_img(png, 'accepted per asset')}")


def _rejections(report: Mapping[str, Any], png: bytes) -> str:
    rows = "".join(
        f"<tr>{_cell(STAGE_LABELS[stage])}{_cell(reason)}"
        f"{_cell(count, stage=stage, reason=reason, field='rejections')}</tr>"
        for stage in STAGES for reason, count in report["rejections"][stage].items()
    ) or '<tr><td colspan="3">no rejections</td></tr>'
    return (f"<h2>Rejections</h2><table><tr><th>stage</th><th>reason</th><th>count</th></tr>"
            f"{rows}</table>{_img(png, 'rejection reasons by stage')}")


def _episodes(report: Mapping[str, Any], png: bytes) -> str:
    heads = "".join(f"<th>{escape(name.removesuffix('_s'))} s</th>" for name, _ in PHASES)
    rows = "".join(
        f"<tr>{_cell(e['batch_index'])}{_cell(e['episode_index'])}"
        f"{_cell('yes' if e['accepted'] else 'no')}{_cell(e['reason'])}"
        f"{_cell(e['started_at'])}"
        + "".join(_cell(_seconds(e["phases"].get(name))) for name, _ in PHASES)
        + _cell(_seconds(e["duration_s"]), batch=e["batch_index"], episode=e["episode_index"],
                field="duration")
        + "</tr>"
        for e in report["episodes"]
    )
    return (f"<h2>Episodes</h2><table><tr><th>batch</th><th>episode</th><th>accepted</th>"
            f"<th>reason</th><th>started (UTC)</th>{heads}<th>total s</th></tr>{rows}</table>"
            f"{_img(png, 'episode durations')}")


def _sessions(report: Mapping[str, Any], png: bytes) -> str:
    rows = "".join(
        f"<tr>{_cell(s['session_id'])}{_cell(s['kind'])}{_cell(s['start'])}{_cell(s['end'])}"
        f"{_cell('crashed' if s['crashed'] else s['ended_by'], field='session-end')}</tr>"
        for s in report["sessions"]
    )
    return (f"<h2>Sessions</h2><table><tr><th>session</th><th>kind</th><th>first event</th>"
            f"<th>last event</th><th>ended by</th></tr>{rows}</table>"
            f"{_img(png, 'sessions timeline')}")


def _asset_sets(report: Mapping[str, Any], thumbs: Mapping[str, bytes | str]) -> str:
    blocks = []
    for batch in report["batches"]:
        cards = []
        for role, asset in sorted(batch["assets"].items()):
            shown = thumbs.get(thumbnail_key(role, str(asset["content_sha256"])))
            picture = (
                _img(shown, f"{role} {asset['asset_id']}", "thumb")
                if isinstance(shown, bytes)
                else f'<p class="unavailable">{escape(shown or "no thumbnail")}</p>'
            )
            cards.append(f'<div class="asset">{picture}<br><b>{escape(role)}</b>: '
                         f"{escape(str(asset['asset_id']))}<br>"
                         f"<code>{escape(str(asset['content_sha256'])[:16])}</code></div>")
        blocks.append(f"<h3>batch {batch['batch_index']}</h3><div class=\"sets\">"
                      f"{''.join(cards)}</div>")
    return "<h2>Asset sets</h2>" + ("".join(blocks) or "<p>no asset sets</p>")


def _frames(report: Mapping[str, Any], frames: Mapping[tuple[int, int], bytes | str]) -> str:
    if not frames:
        return "<h2>Episode frames</h2><p>no camera frames in this run</p>"
    committed = sum(
        1 for e in report["episodes"] if e["accepted"] and e.get("trajectory_sha256")
    )
    cards = []
    for (b, e), shown in sorted(frames.items()):
        picture = (
            _img(shown, f"batch {b} episode {e}", "frame")
            if isinstance(shown, bytes)
            else f'<p class="unavailable">{escape(shown)}</p>'
        )
        cards.append(f'<div class="episode-frames" data-batch="{b}" data-episode="{e}">'
                     f"{picture}<br>batch {b} episode {e}</div>")
    return (f'<h2>Episode frames</h2><p>frames read back from the committed videos of '
            f'<span id="frames-shown">{len(frames)}</span> of '
            f'<span id="frames-committed">{committed}</span> committed episodes (evenly '
            f"spaced; every camera, first to last frame)</p>"
            f'<div class="sets">{"".join(cards)}</div>')


def thumbnail_key(role: str, content_sha256: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in role)
    return f"{safe}_{content_sha256[:16]}"


def render_page(
    report: Mapping[str, Any], chain: ChainReport, plots: Mapping[str, bytes],
    thumbs: Mapping[str, bytes | str], frames: Mapping[tuple[int, int], bytes | str],
) -> str:
    title = f"assetcast run {report['run_id']}"
    summary = (
        f"<p>task <b>{escape(str(report['task_id']))}</b>, state "
        f"<b id=\"state\">{escape(str(report['state']))}</b>, "
        f"<span id=\"events\">{report['events']}</span> events; episodes "
        f"<b id=\"accepted\">{report['accepted']}</b> accepted of "
        f"<b id=\"attempted\">{report['attempted']}</b> attempted</p>"
    )
    body = "".join((
        f"<h1>{escape(title)}</h1>", summary, _chain_block(chain),
        _batches(report, plots["accepted_per_batch"]),
        _assets(report, plots["accepted_per_asset"]),
        _asset_sets(report, thumbs),
        _rejections(report, plots["rejections_by_stage"]),
        _episodes(report, plots["episode_durations"]),
        _sessions(report, plots["sessions_timeline"]),
        _frames(report, frames),
        "<p><small>Every number on this page is a projection of the run's event log.</small></p>",
    ))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
        f"<body>{body}</body></html>\n"
    )
