"""Forensics: what happened to one run, reconstructed from its log alone.

After a crash or failure the first questions are: what state is the run in, which session
died without closing its simulator, which episode was in flight and how far it got, what
the recorded failure said, and who resumed or took over the run since. Each answer is
read off the event log, so the report is the same on any machine holding the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store.projections.audit import EventLike, episode_key, event_time, lifecycle_state

FORENSICS_SCHEMA_VERSION = 1

# How far an episode got, by the last event of its grammar that made it into the log.
_EPISODE_STEPS = {
    "EpisodeStarted": "started",
    "InitialChecked": "initial_checked",
    "EpisodeExecuted": "executed",
    "EpisodeJudged": "judged",
    "TrajectoryCommitted": "committed",
    "TrajectoryDiscarded": "discarded",
    "ResetSubmitted": "reset_submitted",
}
_DONE_STEPS = {"committed", "discarded", "reset_submitted"}
_SESSION_STARTS = {"PreparationStarted": "preparation", "CollectionStarted": "collection"}


def _stamp(event: EventLike) -> dict[str, Any]:
    return {"seq": event.seq, "recorded_at": event_time(event)}


def _sessions(events: Sequence[EventLike]) -> list[dict[str, Any]]:
    """Sessions in log order; a session's span runs until the next session or resume begins."""
    sessions: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for event in events:
        p = event.payload
        if event.type in _SESSION_STARTS or event.type == "RunResumed":
            kind = _SESSION_STARTS.get(event.type, "resume")
            if current is not None and current["session_id"] == p.get("session_id"):
                current["kind"] = f"{current['kind']}+{kind}"  # e.g. a resume that collects
                continue
            current = {
                "session_id": p.get("session_id"),
                "kind": kind,
                "host": p.get("host"),
                "pid": p.get("pid"),
                "started": _stamp(event),
                "environment_built": False,
                "environment_closed": None,
                "ended_by": None,
                "last_seq": event.seq,
            }
            sessions.append(current)
            continue
        if current is None:
            continue
        current["last_seq"] = event.seq
        if event.type == "EnvironmentBuilt":
            current["environment_built"] = True
        elif event.type == "EnvironmentClosed":
            current["environment_closed"] = {
                "ok": p.get("ok"),
                "error_type": p.get("error_type"),
                "detail": p.get("detail"),
                **_stamp(event),
            }
        elif event.type in ("RunFailed", "RunCompleted", "PreparationCompleted"):
            current["ended_by"] = event.type
    for session in sessions:
        # No RunFailed/RunCompleted/PreparationCompleted in its span: the process vanished
        # (killed, power loss) or, if it is the last session, it may still be running.
        session["crashed"] = session["ended_by"] is None
        session["may_be_live"] = session["crashed"] and session is sessions[-1]
    return sessions


def _episodes(events: Sequence[EventLike]) -> dict[tuple[int, int], dict[str, Any]]:
    episodes: dict[tuple[int, int], dict[str, Any]] = {}
    for event in events:
        step = _EPISODE_STEPS.get(event.type)
        if step is None:
            continue
        p = event.payload
        key = episode_key(p)
        if step == "started":
            previous = episodes.get(key)
            episodes[key] = {
                "batch_index": key[0],
                "episode_index": key[1],
                "seed": p.get("seed"),
                "started": _stamp(event),
                "attempts": (previous["attempts"] + 1) if previous else 1,
                "reached": "started",
                "last_event": {"type": event.type, **_stamp(event)},
            }
        elif key in episodes:
            episodes[key]["reached"] = step
            episodes[key]["last_event"] = {"type": event.type, **_stamp(event)}
    return episodes


def _with_stamp(event: EventLike) -> dict[str, Any]:
    return {**dict(event.payload), **_stamp(event)}


def forensics(events: Sequence[EventLike]) -> dict[str, Any]:
    """The forensic report of one run's log (events in seq order)."""
    created = next((e.payload for e in events if e.type == "RunCreated"), {})
    sessions = _sessions(events)
    episodes = _episodes(events)
    unfinished = [e for e in episodes.values() if e["reached"] not in _DONE_STEPS]
    failures = [_with_stamp(e) for e in events if e.type == "RunFailed"]
    collection_sessions = [s for s in sessions if "collection" in s["kind"]]
    state = lifecycle_state(events)
    failed_from = None
    running: str | None = None
    for event in events:
        if event.type == "RunFailed":
            failed_from = running
        running = lifecycle_state([event]) or running
    last = events[-1] if events else None
    return {
        "schema_version": FORENSICS_SCHEMA_VERSION,
        "run_id": created.get("run_id"),
        "task_id": created.get("task_id"),
        "goal": created.get("goal"),
        "state": state,
        "failed_from": failed_from if state == "failed" else None,
        "events": len(events),
        "last_event": (
            {"type": last.type, "payload": dict(last.payload), **_stamp(last)} if last else None
        ),
        "sessions": sessions,
        "open_collection_sessions": [s for s in collection_sessions if not s["environment_closed"]],
        "crashed_sessions": [s for s in sessions if s["crashed"]],
        "interrupted_episode": unfinished[-1] if unfinished else None,
        "unfinished_episodes": unfinished,
        "restarted_episodes": [e for e in episodes.values() if e["attempts"] > 1],
        "failure": failures[-1] if failures else None,
        "failures": failures,
        "resumes": [_with_stamp(e) for e in events if e.type == "RunResumed"],
        "lease_takeovers": [_with_stamp(e) for e in events if e.type == "LeaseTakenOver"],
    }
