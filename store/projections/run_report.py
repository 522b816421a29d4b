"""The run report's numbers, as a pure projection of the event log.

Why a projection: the HTML/PNG report (runtime/report) draws only what this returns, so
every figure a reader sees can be recomputed from the log, and a test can compare the page
with the log. Only *done* episodes count (a re-run after a crash supersedes the attempt it
repeats), as in the collection report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from store.projections.audit import EventLike, episode_key, event_time, lifecycle_state
from store.projections.forensics import forensics

REPORT_SCHEMA_VERSION = 1

STAGES = ("preparation", "initial_checks", "program", "final_checks")
"""Where an attempt can be rejected, in the order a run meets them."""

PHASES = (
    ("reset_s", "EpisodeStarted"), ("initial_s", "InitialChecked"),
    ("program_s", "EpisodeExecuted"), ("final_s", "EpisodeJudged"),
    ("commit_s", "TrajectoryCommitted"), ("reset_after_s", "ResetSubmitted"),
)
_PHASE_OF = {event_type: name for name, event_type in PHASES}


def _failed_names(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(c.get("name")) for c in checks if c.get("status") != "passed"] or ["no checks"]


def _stopped_skill(skills: Sequence[Mapping[str, Any]]) -> str:
    stopped = next((s for s in skills if not s.get("completed")), None)
    return "no skill completed" if stopped is None else str(stopped.get("skill"))


class _Episodes:
    """Attempts by episode, with the facts of the latest one (crash re-runs replace)."""

    def __init__(self) -> None:
        self.attempts: dict[tuple[int, int], dict[str, Any]] = {}
        self.done: dict[tuple[int, int], dict[str, Any]] = {}

    def apply(self, event: EventLike) -> None:
        p = event.payload
        key = episode_key(p)
        if event.type == "EpisodeStarted":
            self.done.pop(key, None)
            self.attempts[key] = {
                "batch_index": key[0], "episode_index": key[1], "seed": p["seed"],
                "started_at": p.get("started_at"), "recorded_at": event_time(event),
                "accepted": False, "reason": None, "causes": [], "phases": {},
                "trajectory_sha256": None,
            }
        attempt = self.attempts.get(key)
        if attempt is None:
            return
        seconds = p.get("reset_s" if event.type == "EpisodeStarted" else "duration_s")
        if seconds is not None and event.type in _PHASE_OF:
            attempt["phases"][_PHASE_OF[event.type]] = float(seconds)
        if event.type == "InitialChecked" and not p["passed"]:
            attempt["causes"] = _failed_names(p["checks"])
        elif event.type == "EpisodeExecuted" and not p["completed"]:
            attempt["causes"] = [_stopped_skill(p["skills"])]
        elif event.type == "EpisodeJudged":
            attempt["accepted"], attempt["reason"] = bool(p["accepted"]), p["reason"]
            if not p["accepted"] and p["checks"]:
                attempt["causes"] = _failed_names(p["checks"])
        elif event.type in ("TrajectoryCommitted", "TrajectoryDiscarded"):
            if event.type == "TrajectoryCommitted":
                attempt["trajectory_sha256"] = p["sha256"]
            self.done[key] = attempt


_REASON_STAGE = {
    "initial_checks_failed": "initial_checks",
    "program_incomplete": "program",
    "final_checks_failed": "final_checks",
}


def _episode_entry(attempt: Mapping[str, Any]) -> dict[str, Any]:
    phases = dict(attempt["phases"])
    return {
        "batch_index": attempt["batch_index"],
        "episode_index": attempt["episode_index"],
        "seed": attempt["seed"],
        "accepted": attempt["accepted"],
        "reason": attempt["reason"],
        "started_at": attempt["started_at"],
        "phases": phases,
        "duration_s": round(sum(phases.values()), 6) if phases else None,
        "trajectory_sha256": attempt["trajectory_sha256"],
    }


def _sessions(events: Sequence[EventLike]) -> list[dict[str, Any]]:
    """Each session's first and last recorded time; crashes show as a session without an
    ending followed by a gap until the next one."""
    times = {e.seq: event_time(e) for e in events}
    out = []
    for s in forensics(events)["sessions"]:
        out.append({
            "session_id": s["session_id"], "kind": s["kind"],
            "start": s["started"]["recorded_at"], "end": times.get(s["last_seq"]),
            "first_seq": s["started"]["seq"], "last_seq": s["last_seq"],
            "ended_by": s["ended_by"], "crashed": bool(s["crashed"]),
            "may_be_live": bool(s["may_be_live"]),
        })
    return out


def run_report(events: Sequence[EventLike]) -> dict[str, Any]:
    """Everything the run report shows. Shape (``schema_version`` 1): ``run_id``,
    ``task_id``, ``state``, ``events``, ``accepted``/``attempted``, ``batches`` [{index,
    asset_set_id, assets {role: {asset_id, content_sha256}}, accepted, attempted}],
    ``assets`` [{role, asset_id, content_sha256, snapshot_dir, batches, accepted,
    attempted}], ``rejections`` {stage: {reason: count}}, ``episodes`` [{..., phases,
    duration_s}], ``sessions`` [{session_id, kind, start, end, ended_by, crashed}]."""
    created: Mapping[str, Any] = {}
    resolved: dict[int, dict[str, Any]] = {}
    snapshot_dirs: dict[str, str] = {}
    rejections: dict[str, Counter[str]] = {stage: Counter() for stage in STAGES}
    episodes = _Episodes()
    for event in events:
        p = event.payload
        if event.type == "RunCreated":
            created = p
        elif event.type == "CandidatePrepared":
            snapshot_dirs.setdefault(str(p["content_sha256"]), str(p["snapshot_dir"]))
        elif event.type in ("CandidateRejected", "CandidateListingFailed"):
            rejections["preparation"][str(p["error_type"])] += 1
        elif event.type == "BatchUnresolvable":
            rejections["preparation"][str(p["error_type"])] += 1
        elif event.type == "BatchResolved":
            resolved[int(p["batch_index"])] = {
                "asset_set_id": p["asset_set_id"], "assets": dict(p["assets"]),
            }
        elif event.type in _PHASE_OF or event.type == "TrajectoryDiscarded":
            episodes.apply(event)
    done = [_episode_entry(a) for _, a in sorted(episodes.done.items())]
    for entry, (_, attempt) in zip(done, sorted(episodes.done.items()), strict=True):
        stage = _REASON_STAGE.get(str(entry["reason"]))
        if stage is not None:
            for cause in attempt["causes"] or [str(entry["reason"])]:
                rejections[stage][cause] += 1
    batches = []
    for index in sorted(resolved):
        mine = [e for e in done if e["batch_index"] == index]
        batches.append({
            "batch_index": index,
            "asset_set_id": resolved[index]["asset_set_id"],
            "assets": resolved[index]["assets"],
            "accepted": sum(e["accepted"] for e in mine),
            "attempted": len(mine),
        })
    assets: dict[tuple[str, str], dict[str, Any]] = {}
    for batch in batches:
        for role, asset in sorted(batch["assets"].items()):
            sha = str(asset["content_sha256"])
            entry = assets.setdefault((role, sha), {
                "role": role, "asset_id": asset["asset_id"], "content_sha256": sha,
                "snapshot_dir": snapshot_dirs.get(sha), "batches": [], "accepted": 0,
                "attempted": 0,
            })
            entry["batches"].append(batch["batch_index"])
            entry["accepted"] += batch["accepted"]
            entry["attempted"] += batch["attempted"]
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "run_id": created.get("run_id"),
        "task_id": created.get("task_id"),
        "output_dir": created.get("output_dir"),
        "state": lifecycle_state(events),
        "events": len(events),
        "first_event_at": event_time(events[0]) if events else None,
        "last_event_at": event_time(events[-1]) if events else None,
        "accepted": sum(e["accepted"] for e in done),
        "attempted": len(done),
        "batches": batches,
        "assets": [assets[k] for k in sorted(assets)],
        "rejections": {stage: dict(sorted(c.items())) for stage, c in rejections.items()},
        "episodes": done,
        "sessions": _sessions(events),
    }

