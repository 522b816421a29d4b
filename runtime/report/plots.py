"""The report's plots as PNG bytes (matplotlib, Agg backend: no display, no GL).

Each function takes the ``run_report`` projection and returns one figure; none reads
anything else, so the plots show exactly the log's numbers.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from store.projections.run_report import PHASES, STAGES  # noqa: E402

_ACCEPTED, _ATTEMPTED, _CRASHED, _OK = "#2e7d32", "#b0bec5", "#c62828", "#1565c0"
STAGE_LABELS = {
    "preparation": "preparation", "initial_checks": "initial checks", "program": "program",
    "final_checks": "final checks",
}


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    # metadata without Software/date: the same log gives the same bytes.
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555")
    ax.set_xticks([])
    ax.set_yticks([])


def _bars(labels: list[str], accepted: list[int], attempted: list[int], title: str,
          *, horizontal: bool) -> bytes:
    height = max(2.6, 0.35 * len(labels) + 1.2) if horizontal else 3.2
    fig, ax = plt.subplots(figsize=(7.5, height))
    if not labels:
        _empty(ax, "no batches")
    elif horizontal:
        ys = range(len(labels))
        ax.barh(ys, attempted, color=_ATTEMPTED, label="attempted")
        ax.barh(ys, accepted, color=_ACCEPTED, label="accepted")
        ax.set_yticks(list(ys), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("episodes")
    else:
        xs = range(len(labels))
        ax.bar(xs, attempted, color=_ATTEMPTED, label="attempted")
        ax.bar(xs, accepted, color=_ACCEPTED, label="accepted")
        ax.set_xticks(list(xs), labels, fontsize=8)
        ax.set_ylabel("episodes")
    if labels:
        ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    return _png(fig)


def per_batch(report: Mapping[str, Any]) -> bytes:
    batches = report["batches"]
    return _bars(
        [f"batch {b['batch_index']}" for b in batches], [b["accepted"] for b in batches],
        [b["attempted"] for b in batches], "accepted / attempted per batch", horizontal=False,
    )


def per_asset(report: Mapping[str, Any]) -> bytes:
    assets = report["assets"]
    return _bars(
        [f"{a['role']}: {a['asset_id']}" for a in assets], [a["accepted"] for a in assets],
        [a["attempted"] for a in assets], "accepted / attempted per asset", horizontal=True,
    )


def rejections(report: Mapping[str, Any]) -> bytes:
    by_stage = report["rejections"]
    reasons = sorted({r for stage in STAGES for r in by_stage[stage]})
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    if not reasons:
        _empty(ax, "no rejections")
    else:
        xs = list(range(len(STAGES)))
        bottom = [0] * len(STAGES)
        cmap = plt.get_cmap("tab20")
        for i, reason in enumerate(reasons):
            counts = [by_stage[stage].get(reason, 0) for stage in STAGES]
            ax.bar(xs, counts, bottom=bottom, color=cmap(i % 20), label=reason)
            bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
        ax.set_xticks(xs, [STAGE_LABELS[s] for s in STAGES])
        ax.set_ylabel("rejections")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("rejection reasons by stage")
    fig.tight_layout()
    return _png(fig)


def durations(report: Mapping[str, Any]) -> bytes:
    episodes = [e for e in report["episodes"] if e["duration_s"] is not None]
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    if not episodes:
        _empty(ax, "no episode timings in the log")
    else:
        xs = list(range(len(episodes)))
        bottom = [0.0] * len(episodes)
        cmap = plt.get_cmap("Set2")
        for i, (phase, _event) in enumerate(PHASES):
            values = [float(e["phases"].get(phase, 0.0)) for e in episodes]
            ax.bar(xs, values, bottom=bottom, color=cmap(i), label=phase.removesuffix("_s"))
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        step = max(1, len(episodes) // 20)
        ax.set_xticks(
            xs[::step], [f"b{e['batch_index']}e{e['episode_index']}" for e in episodes][::step],
            fontsize=7, rotation=45,
        )
        ax.set_ylabel("seconds")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("episode durations by phase (monotonic)")
    fig.tight_layout()
    return _png(fig)


def _when(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def timeline(report: Mapping[str, Any]) -> bytes:
    sessions = report["sessions"]
    fig, ax = plt.subplots(figsize=(7.5, max(2.2, 0.4 * len(sessions) + 1.2)))
    if not sessions:
        _empty(ax, "no sessions")
    else:
        origin = _when(sessions[0]["start"])
        assert origin is not None
        for i, s in enumerate(sessions):
            start, end = _when(s["start"]), _when(s["end"]) or _when(s["start"])
            assert start is not None and end is not None
            x0 = (start - origin).total_seconds()
            width = max((end - start).total_seconds(), 0.02)
            color = _CRASHED if s["crashed"] else _OK
            ax.barh(i, width, left=x0, color=color, height=0.6)
            status = "crashed" if s["crashed"] else (s["ended_by"] or "")
            ax.text(x0 + width, i, f"  {status}", va="center", fontsize=7)
        ax.set_yticks(range(len(sessions)), [f"{s['kind']} {s['session_id']}" for s in sessions],
                      fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(f"seconds since {origin.strftime('%Y-%m-%d %H:%M:%S')} UTC")
    ax.set_title("sessions (red: ended without a final event, i.e. crashed)")
    fig.tight_layout()
    return _png(fig)


PLOTS = {
    "accepted_per_batch": per_batch,
    "accepted_per_asset": per_asset,
    "rejections_by_stage": rejections,
    "episode_durations": durations,
    "sessions_timeline": timeline,
}
"""File stem -> drawing function; the report writes each as ``<stem>.png``."""
