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


_LAST_TIME: tuple[Any, str | None] = (None, None)


def event_time(event: EventLike) -> str | None:
    """The recorded time as ISO-8601 text, whatever type the store hands back.

    Every event of one append shares one ``recorded_at`` object, and projections ask for it
    several times per event: the last conversion is remembered (by identity)."""
    global _LAST_TIME
    value = event.recorded_at
    last = _LAST_TIME
    if value is last[0] and value is not None:
        return last[1]
    if value is None:
        return None
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    _LAST_TIME = (value, text)
    return text


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


def run_summary(run_id: str, events: Iterable[EventLike]) -> dict[str, Any]:
    """One run at a glance: task, state, batch and episode counts, first and last event
    (the same answer the store's snapshotted ``RunDigest`` gives without re-reading)."""
    from store.projections.run_digest import RunDigest

    digest = RunDigest()
    for event in events:
        digest.apply(event)
    return digest.summary(run_id)


def _add_counts(into: dict[str, int], counts: Mapping[str, int]) -> None:
    for reason, count in counts.items():
        into[reason] = into.get(reason, 0) + count


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
            "episode_rejections": {},
            "rejections": [],
        }
    return table[key]


def _audit_run(
    run_id: str,
    events: Iterable[EventLike],
    assets: dict[tuple[str, str], dict[str, Any]],
    unprepared: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """One pass over one run's log (streamed: nothing per done episode is kept)."""
    # candidate_id → identity, per role, as prepared in this run.
    identity_of: dict[tuple[str, str], tuple[str, str]] = {}
    by_asset_id: dict[tuple[str, str], tuple[str, str]] = {}
    batch_assets: dict[int, dict[str, tuple[str, str]]] = {}
    judged: dict[tuple[int, int], bool] = {}  # open episodes: judged accepted?
    # batch -> [attempted, accepted, timed, seconds] over done episodes
    done: dict[int, list[Any]] = {}
    # Measured time so far of the open episode and of those done since the last start (their
    # reset after the commit still counts): flushed into ``done`` at the next start.
    seconds: dict[tuple[int, int], float | None] = {}
    finished: list[tuple[int, int]] = []

    def flush() -> None:
        for key in finished:
            took = seconds.pop(key, None)
            if took is not None:
                counts = done[key[0]]
                counts[2] += 1
                counts[3] += took
        finished.clear()

    for event in events:
        p = event.payload
        if "duration_s" in p and seconds.get(episode_key(p)) is not None:
            seconds[episode_key(p)] += p["duration_s"]  # type: ignore[operator]
        if event.type == "EpisodeStarted":
            flush()
            judged.pop(episode_key(p), None)
            seconds[episode_key(p)] = p.get("reset_s")  # measured timing (absent in older logs)
        elif event.type == "EpisodeJudged":
            judged[episode_key(p)] = bool(p["accepted"])
        elif event.type in ("TrajectoryCommitted", "TrajectoryDiscarded"):
            key = episode_key(p)
            counts = done.setdefault(key[0], [0, 0, 0, 0.0])
            counts[0] += 1
            counts[1] += int(judged.pop(key, False))
            finished.append(key)
        elif event.type == "CandidatePrepared":
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
    flush()
    for batch_index, (_attempted, _accepted, timed, seconds_sum) in done.items():
        for ident in batch_assets.get(batch_index, {}).values():
            entry = _asset_entry(assets, *ident)
            entry["episodes_timed"] += timed
            entry["episode_seconds"] = round(entry["episode_seconds"] + seconds_sum, 6)


class _Audit:
    """The audit accumulated run by run, so only one run's log is in flight at a time."""

    def __init__(self) -> None:
        self.assets: dict[tuple[str, str], dict[str, Any]] = {}
        self.unprepared: dict[tuple[str, str], dict[str, Any]] = {}
        self.runs: list[dict[str, Any]] = []

    def add(
        self,
        run_id: str,
        summary: dict[str, Any],
        events: Iterable[EventLike],
        outcomes: Sequence[dict[str, Any]],
    ) -> None:
        """One run: its summary, one pass over its log, and its per-asset episode results
        (``store.projections.asset_outcomes``: attempted, accepted, rejections by reason)."""
        self.runs.append(summary)
        _audit_run(run_id, events, self.assets, self.unprepared)
        for row in outcomes:
            entry = _asset_entry(self.assets, row["asset_id"], row["content_sha256"])
            entry["episodes_attempted"] += row["attempted"]
            entry["episodes_accepted"] += row["accepted"]
            _add_counts(entry["episode_rejections"], row["rejections"])

    def absorb(self, part: _Audit) -> None:
        """Add another accumulation (one run's) to this one, as if added here directly."""
        self.runs += part.runs
        for key, entry in part.assets.items():
            mine = self.assets.get(key)
            if mine is None:
                self.assets[key] = entry
                continue
            for name in ("roles", "prepared_for_roles", "prepared_in_runs", "runs"):
                mine[name] |= entry[name]
            mine["batches"] += entry["batches"]
            _add_counts(mine["episode_rejections"], entry["episode_rejections"])
            mine["rejections"] += entry["rejections"]
            mine["episodes_attempted"] += entry["episodes_attempted"]
            mine["episodes_accepted"] += entry["episodes_accepted"]
            mine["episodes_timed"] += entry["episodes_timed"]
            mine["episode_seconds"] = round(mine["episode_seconds"] + entry["episode_seconds"], 6)
        for key, slot in part.unprepared.items():
            if key in self.unprepared:
                self.unprepared[key]["rejections"] += slot["rejections"]
            else:
                self.unprepared[key] = slot

    def report(self) -> dict[str, Any]:
        asset_rows = []
        for key in sorted(self.assets):
            entry = self.assets[key]
            entry["roles"] = sorted(entry["roles"])
            entry["prepared_for_roles"] = sorted(entry["prepared_for_roles"])
            entry["runs"] = sorted(entry["runs"])
            entry["prepared_in_runs"] = sorted(entry["prepared_in_runs"])
            entry["batches"].sort(key=lambda b: (b["run_id"], b["batch_index"], b["role"]))
            entry["episode_rejections"] = dict(
                sorted(entry["episode_rejections"].items(), key=lambda kv: (-kv[1], kv[0]))
            )
            asset_rows.append(entry)
        return {
            "schema_version": AUDIT_SCHEMA_VERSION,
            "runs": self.runs,
            "assets": asset_rows,
            "unprepared_candidates": [self.unprepared[k] for k in sorted(self.unprepared)],
        }


def audit_logs(logs: Mapping[str, Sequence[EventLike]]) -> dict[str, Any]:
    """The audit of several runs' event logs (``run_id`` → events in seq order)."""
    from store.projections.asset_outcomes import asset_outcomes

    accumulated = _Audit()
    for run_id in sorted(logs):
        accumulated.add(
            run_id, run_summary(run_id, logs[run_id]), logs[run_id], asset_outcomes(logs[run_id])
        )
    return accumulated.report()


class ReadableStore(Protocol):
    def run_ids(self) -> Sequence[str]: ...

    def iter_events(self, run_id: str, *, after_seq: int = 0) -> Iterable[Any]: ...

    def project(self, run_id: str, kind: str) -> Any: ...


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
    """Audit every readable run in ``store``: each run's summary from its snapshotted digest,
    its asset facts from one streamed pass over its log (memory: the answer, not the logs).
    A run whose log holds an event that cannot be decoded is left out whole and named in
    ``unreadable_runs`` (run, first bad seq, reason); the others are still audited."""
    accumulated = _Audit()
    unreadable = []
    for run_id in sorted(store.run_ids()):
        part = _Audit()
        try:
            part.add(run_id, store.project(run_id, "digest").summary(run_id),
                     store.iter_events(run_id),
                     store.project(run_id, "asset_outcomes").report())
        except EventSchemaError as error:
            unreadable.append(unreadable_entry(run_id, error))
            continue
        accumulated.absorb(part)
    report = accumulated.report()
    report["unreadable_runs"] = unreadable
    return report
