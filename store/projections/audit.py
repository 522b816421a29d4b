"""Audit: which assets were used where, and with what result, across every run in a store.

The question an auditor asks is "what did this asset take part in?": which runs and batches
used it, how many episodes it was attempted and accepted in, and every time it was turned
down as a candidate and why. All of it is a pure function of the event logs; nothing here
looks at files, so an audit is as trustworthy as the ledger itself.

:func:`run_summary` is the per-run digest shared by the ``runs`` table and the audit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from domain.errors import EventSchemaError

AUDIT_SCHEMA_VERSION = 1

# Which state each lifecycle event leaves a run in (RunResumed names its own target).
_STATE_AFTER: dict[str, str] = {
    "RunCreated": "preparing",
    "PreparationCompleted": "prepared",
    "CollectionStarted": "collecting",
    "RunCompleted": "completed",
    "RunFailed": "failed",
}


class EventLike(Protocol):
    """What a projection needs of a recorded event (``store`` RecordedEvent satisfies it)."""

    seq: int
    type: str
    payload: Mapping[str, Any]
    recorded_at: Any


class ReadableStore(Protocol):
    def list_runs(self) -> Sequence[Any]: ...

    def read(self, run_id: str, *, after_seq: int = 0) -> Sequence[Any]: ...


def event_time(event: EventLike) -> str | None:
    """The recorded time as ISO-8601 text, whatever type the store hands back."""
    value = event.recorded_at
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def episode_key(payload: Mapping[str, Any]) -> tuple[int, int]:
    """(batch_index, episode_index): how every episode event names its episode."""
    return int(payload["batch_index"]), int(payload["episode_index"])


def lifecycle_state(events: Iterable[EventLike]) -> str | None:
    """The run state implied by the log (mirrors the lifecycle machine's transitions)."""
    state: str | None = None
    for event in events:
        if event.type == "RunResumed":
            state = str(event.payload.get("to_state"))
        elif event.type in _STATE_AFTER:
            state = _STATE_AFTER[event.type]
    return state


def _failed_checks(checks: Sequence[dict[str, Any]]) -> str:
    """The checks that did not pass, by name and status ("on_table failed")."""
    failed = [f"{c['name']} {c['status']}" for c in checks if c.get("status") != "passed"]
    return ", ".join(failed) or "no checks"


def _failed_skill(skills: Sequence[dict[str, Any]]) -> str:
    """The skill that stopped the program ("pick item")."""
    stopped = next((s for s in skills if not s.get("completed")), None)
    if stopped is None:
        return "no skill completed"
    return f"{stopped.get('skill')} {stopped.get('object')}".strip()


def episode_outcomes(events: Iterable[EventLike]) -> dict[tuple[int, int], dict[str, Any]]:
    """Every *done* episode (commit-or-discard logged) → its final judgement.

    An episode that was judged but interrupted before its commit-or-discard is re-run on
    resume, so only the judgement that precedes the commit-or-discard counts.
    """
    judged: dict[tuple[int, int], tuple[bool, str]] = {}
    causes: dict[tuple[int, int], str] = {}
    done: dict[tuple[int, int], dict[str, Any]] = {}
    seconds: dict[tuple[int, int], float | None] = {}
    for event in events:
        p = event.payload
        if "duration_s" in p and seconds.get(episode_key(p)) is not None:
            seconds[episode_key(p)] += p["duration_s"]  # type: ignore[operator]
        if event.type == "EpisodeStarted":
            key = episode_key(p)
            judged.pop(key, None)
            done.pop(key, None)
            causes.pop(key, None)
            seconds[key] = p.get("reset_s")  # measured timing (absent in older logs)
        elif event.type == "InitialChecked" and not p["passed"]:
            causes[episode_key(p)] = _failed_checks(p["checks"])
        elif event.type == "EpisodeExecuted" and not p["completed"]:
            causes[episode_key(p)] = _failed_skill(p["skills"])
        elif event.type == "EpisodeJudged":
            key = episode_key(p)
            judged[key] = (bool(p["accepted"]), str(p.get("reason", "")))
            if not p["accepted"] and p["checks"]:
                causes[key] = _failed_checks(p["checks"])
        elif event.type in ("TrajectoryCommitted", "TrajectoryDiscarded"):
            key = episode_key(p)
            accepted, judgement = judged.get(key, (False, "not judged"))
            done[key] = {
                "accepted": accepted,
                "judgement": judgement,
                "cause": None if accepted else causes.get(key),
                "committed": event.type == "TrajectoryCommitted",
                "path": p.get("path"),
                "sha256": p.get("sha256"),
                "reason": p.get("reason"),
            }
    for key, outcome in done.items():  # ResetSubmitted's time comes after the verdict
        outcome["duration_s"] = seconds.get(key)
    return done


def run_summary(run_id: str, events: Sequence[EventLike]) -> dict[str, Any]:
    """One run at a glance: task, state, batch and episode counts, first and last event."""
    created = next((e.payload for e in events if e.type == "RunCreated"), {})
    config = created.get("config") or {}
    prepared = [e.payload for e in events if e.type == "PreparationCompleted"]
    resolved = {int(e.payload["batch_index"]) for e in events if e.type == "BatchResolved"}
    finished = {int(e.payload["batch_index"]) for e in events if e.type == "BatchFinished"}
    outcomes = episode_outcomes(events)
    batches_total = prepared[-1].get("batches") if prepared else config.get("max_batches")
    return {
        "run_id": run_id,
        "task_id": created.get("task_id"),
        "goal": created.get("goal"),
        "output_dir": created.get("output_dir"),
        "state": lifecycle_state(events),
        "created_at": event_time(events[0]) if events else None,
        "last_event_at": event_time(events[-1]) if events else None,
        "last_event_type": events[-1].type if events else None,
        "version": events[-1].seq if events else 0,
        "batches_total": batches_total,
        "batches_resolved": len(resolved),
        "batches_done": len(finished),
        "episodes_attempted": len(outcomes),
        "episodes_accepted": sum(1 for o in outcomes.values() if o["accepted"]),
        "trajectories_committed": sum(1 for o in outcomes.values() if o["committed"]),
        "failures": sum(1 for e in events if e.type == "RunFailed"),
        "resumes": sum(1 for e in events if e.type == "RunResumed"),
    }


def _asset_entry(table: dict[tuple[str, str], dict[str, Any]], asset_id: str, sha: str) -> dict:
    key = (asset_id, sha)
    if key not in table:
        table[key] = {
            "asset_id": asset_id,
            "content_sha256": sha,
            "roles": set(),
            "prepared_for_roles": set(),
            "prepared_in_runs": set(),
            "runs": set(),
            "batches": [],
            "episodes_attempted": 0,
            "episodes_accepted": 0,
            "episodes_timed": 0,
            "episode_seconds": 0.0,
            "rejections": [],
        }
    return table[key]


def _audit_run(
    run_id: str,
    events: Sequence[EventLike],
    assets: dict[tuple[str, str], dict[str, Any]],
    unprepared: dict[tuple[str, str], dict[str, Any]],
) -> None:
    # candidate_id → identity, per role, as prepared in this run.
    identity_of: dict[tuple[str, str], tuple[str, str]] = {}
    by_asset_id: dict[tuple[str, str], tuple[str, str]] = {}
    batch_assets: dict[int, dict[str, tuple[str, str]]] = {}
    for event in events:
        p = event.payload
        if event.type == "CandidatePrepared":
            ident = (str(p["asset_id"]), str(p["content_sha256"]))
            identity_of[(p["role"], p["candidate_id"])] = ident
            by_asset_id[(p["role"], ident[0])] = ident
            entry = _asset_entry(assets, *ident)
            entry["prepared_for_roles"].add(p["role"])
            entry["prepared_in_runs"].add(run_id)
        elif event.type == "CandidateRejected":
            rejection = {
                "run_id": run_id,
                "role": p.get("role"),
                "stage": p.get("stage"),
                "code": p.get("error_type"),
                "detail": p.get("detail"),
                "seq": event.seq,
            }
            ident = identity_of.get((p.get("role"), p.get("candidate_id")))
            if ident is not None:
                _asset_entry(assets, *ident)["rejections"].append(rejection)
            else:
                key = (str(p.get("role")), str(p.get("candidate_id")))
                slot = unprepared.setdefault(
                    key, {"role": key[0], "candidate_id": p.get("candidate_id"), "rejections": []}
                )
                slot["rejections"].append(rejection)
        elif event.type == "BatchResolved":
            index = int(p["batch_index"])
            batch_assets[index] = {
                role: (str(a["asset_id"]), str(a["content_sha256"]))
                for role, a in p["assets"].items()
            }
            for role, ident in batch_assets[index].items():
                entry = _asset_entry(assets, *ident)
                entry["roles"].add(role)
                entry["runs"].add(run_id)
                entry["batches"].append({"run_id": run_id, "batch_index": index, "role": role})
        elif event.type == "BatchUnresolvable":
            for r in p.get("rejections") or []:
                ident = by_asset_id.get((r.get("role"), r.get("asset_id")))
                if ident is None:
                    continue
                _asset_entry(assets, *ident)["rejections"].append(
                    {
                        "run_id": run_id,
                        "role": r.get("role"),
                        "stage": "matching",
                        "code": r.get("code"),
                        "detail": r.get("detail"),
                        "batch_index": int(p["batch_index"]),
                        "target_role": r.get("target_role"),
                        "seq": event.seq,
                    }
                )
    for (batch_index, _episode), outcome in episode_outcomes(events).items():
        for ident in batch_assets.get(batch_index, {}).values():
            entry = _asset_entry(assets, *ident)
            entry["episodes_attempted"] += 1
            entry["episodes_accepted"] += int(outcome["accepted"])
            if outcome["duration_s"] is not None:
                entry["episodes_timed"] += 1
                entry["episode_seconds"] = round(
                    entry["episode_seconds"] + outcome["duration_s"], 6
                )


def audit_logs(logs: Mapping[str, Sequence[EventLike]]) -> dict[str, Any]:
    """The audit of several runs' event logs (``run_id`` → events in seq order)."""
    assets: dict[tuple[str, str], dict[str, Any]] = {}
    unprepared: dict[tuple[str, str], dict[str, Any]] = {}
    runs = []
    for run_id in sorted(logs):
        events = logs[run_id]
        runs.append(run_summary(run_id, events))
        _audit_run(run_id, events, assets, unprepared)
    asset_rows = []
    for key in sorted(assets):
        entry = assets[key]
        entry["roles"] = sorted(entry["roles"])
        entry["prepared_for_roles"] = sorted(entry["prepared_for_roles"])
        entry["runs"] = sorted(entry["runs"])
        entry["prepared_in_runs"] = sorted(entry["prepared_in_runs"])
        entry["batches"].sort(key=lambda b: (b["run_id"], b["batch_index"], b["role"]))
        asset_rows.append(entry)
    return {
        "schema_version": AUDIT_SCHEMA_VERSION,
        "runs": runs,
        "assets": asset_rows,
        "unprepared_candidates": [unprepared[k] for k in sorted(unprepared)],
    }


def unreadable_entry(run_id: str, error: EventSchemaError) -> dict[str, Any]:
    """How a report names a run whose log could not be decoded: run, seq, reason."""
    return {"run_id": run_id, "seq": error.seq, "reason": str(error)}


def read_logs(store: ReadableStore) -> tuple[dict[str, Sequence[Any]], list[dict[str, Any]]]:
    """Every run's log, and the runs whose log holds an event that cannot be decoded.

    One corrupt row must not hide every other run: the broken run is set aside with the
    first bad event (run, seq, reason) and the others are still read.
    """
    logs: dict[str, Sequence[Any]] = {}
    unreadable = []
    for summary in store.list_runs():
        run_id = summary if isinstance(summary, str) else summary.run_id
        try:
            logs[run_id] = store.read(run_id)
        except EventSchemaError as error:
            unreadable.append(unreadable_entry(run_id, error))
    return logs, unreadable


def audit(store: ReadableStore) -> dict[str, Any]:
    """Audit every readable run in ``store`` (the pure :func:`audit_logs` over
    :func:`read_logs`); ``unreadable_runs`` names the runs left out and why."""
    logs, unreadable = read_logs(store)
    report = audit_logs(logs)
    report["unreadable_runs"] = unreadable
    return report
