"""The run report's numbers, as a pure projection of the event log.

Why a projection: the HTML/PNG report (runtime/report) draws only what this returns, so
every figure a reader sees can be recomputed from the log, and a test can compare the page
with the log. Only *done* episodes count (a re-run after a crash supersedes the attempt it
repeats), as in the collection report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from store.projections.audit import EventLike, episode_key, event_time, lifecycle_state
from store.projections.episode_chunks import EpisodeChunked, chunk_of
from store.projections.forensics import ForensicsProjector

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


def _sessions(forensic: ForensicsProjector) -> list[dict[str, Any]]:
    """Each session's first and last recorded time; crashes show as a session without an
    ending followed by a gap until the next one."""
    out = []
    for s, end in zip(forensic.report()["sessions"], forensic.session_ends, strict=True):
        out.append({
            "session_id": s["session_id"], "kind": s["kind"],
            "start": s["started"]["recorded_at"], "end": end,
            "first_seq": s["started"]["seq"], "last_seq": s["last_seq"],
            "ended_by": s["ended_by"], "crashed": bool(s["crashed"]),
            "may_be_live": bool(s["may_be_live"]),
        })
    return out


class RunReport(EpisodeChunked):
    """The run report's numbers accumulated one event at a time (snapshotted: the head is
    per batch, per asset and per session; the episodes live in chunks). Only *done*
    episodes count (a crash re-run replaces the attempt it repeats). ``extra`` of a chunk
    keeps each episode's last receipt naming camera files (what the page's frames show)."""

    KIND = "run_report"
    VERSION = 1

    def __init__(self) -> None:
        super().__init__()
        self.created: dict[str, Any] = {}
        self.resolved: dict[int, dict[str, Any]] = {}
        self.snapshot_dirs: dict[str, str] = {}
        self.preparation: Counter[str] = Counter()
        self.count = 0
        self.first_at: str | None = None
        self.last_at: str | None = None
        self.state: str | None = None

    def _apply(self, event: EventLike) -> None:
        p = event.payload
        self.count += 1
        self.last_at = event_time(event)
        if self.count == 1:
            self.first_at = self.last_at
        now = lifecycle_state([event])
        if now is not None:
            self.state = now
        if event.type == "RunCreated":
            self.created = {k: p.get(k) for k in ("run_id", "task_id", "output_dir")}
        elif event.type == "CandidatePrepared":
            self.snapshot_dirs.setdefault(str(p["content_sha256"]), str(p["snapshot_dir"]))
        elif event.type in ("CandidateRejected", "CandidateListingFailed", "BatchUnresolvable"):
            self.preparation[str(p["error_type"])] += 1
        elif event.type == "BatchResolved":
            self.resolved[int(p["batch_index"])] = {
                "asset_set_id": p["asset_set_id"], "assets": dict(p["assets"]),
            }
        elif event.type in _PHASE_OF or event.type == "TrajectoryDiscarded":
            self._episode(event)

    def _episode(self, event: EventLike) -> None:
        p = event.payload
        b, e = episode_key(p)
        cid = chunk_of(b, e)
        started = event.type == "EpisodeStarted"
        with_files = event.type == "TrajectoryCommitted" and bool(p.get("files"))
        chunk = self.chunk(cid, create=started or with_files)
        if chunk is None:
            return
        if with_files:  # the last receipt with camera files, whatever the attempt
            chunk.extra[e] = dict(p)
            self.dirty.add(cid)
        if started:
            chunk.done.discard(e)
            chunk.attempts[e] = {
                "batch_index": b, "episode_index": e, "seed": p["seed"],
                "started_at": p.get("started_at"), "recorded_at": event_time(event),
                "accepted": False, "reason": None, "causes": [], "phases": {},
                "trajectory_sha256": None,
            }
        attempt = chunk.attempts.get(e)
        if attempt is None:
            return
        self.dirty.add(cid)
        seconds = p.get("reset_s" if started else "duration_s")
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
            chunk.done.add(e)

    def _dump(self) -> Any:
        return {
            "created": self.created,
            "resolved": [[index, entry] for index, entry in self.resolved.items()],
            "snapshot_dirs": self.snapshot_dirs,
            "preparation": dict(self.preparation),
            "count": self.count, "first_at": self.first_at, "last_at": self.last_at,
            "state": self.state, "chunks": self._dump_chunks(),
        }

    def _restore(self, state: Any) -> None:
        self.created = dict(state["created"])
        self.resolved = {int(index): dict(entry) for index, entry in state["resolved"]}
        self.snapshot_dirs = {str(k): str(v) for k, v in state["snapshot_dirs"].items()}
        self.preparation = Counter({str(k): int(v) for k, v in state["preparation"].items()})
        self.count = state["count"]
        if type(self.count) is not int or self.count < 0:
            raise ValueError("run_report snapshot: count is not a count")
        self.first_at, self.last_at = state["first_at"], state["last_at"]
        self.state = state["state"]
        self._restore_chunks(state["chunks"])

    def camera_receipts(self) -> list[dict[str, Any]]:
        """Each episode's last ``TrajectoryCommitted`` payload naming camera files, by key."""
        receipts = []
        for cid in self.chunk_ids():
            chunk = self.peek(cid)
            receipts += [chunk.extra[e] for e in sorted(chunk.extra)]
        return receipts

    def report(self, forensic: ForensicsProjector) -> dict[str, Any]:
        """Everything the run report shows (``forensic``: the same log's forensics, for the
        sessions). Shape (``schema_version`` 1): ``run_id``, ``task_id``, ``state``,
        ``events``, ``accepted``/``attempted``, ``batches`` [{index, asset_set_id, assets
        {role: {asset_id, content_sha256}}, accepted, attempted}], ``assets`` [{role,
        asset_id, content_sha256, snapshot_dir, batches, accepted, attempted}],
        ``rejections`` {stage: {reason: count}}, ``episodes`` [{..., phases, duration_s}],
        ``sessions`` [{session_id, kind, start, end, ended_by, crashed}]."""
        rejections: dict[str, Counter[str]] = {stage: Counter() for stage in STAGES}
        rejections["preparation"].update(self.preparation)
        done: list[dict[str, Any]] = []
        for cid in self.chunk_ids():
            chunk = self.peek(cid)
            for e in sorted(chunk.done):
                attempt = chunk.attempts[e]
                entry = _episode_entry(attempt)
                done.append(entry)
                stage = _REASON_STAGE.get(str(entry["reason"]))
                if stage is not None:
                    for cause in attempt["causes"] or [str(entry["reason"])]:
                        rejections[stage][cause] += 1
        by_batch: dict[int, list[dict[str, Any]]] = {}
        for entry in done:
            by_batch.setdefault(entry["batch_index"], []).append(entry)
        batches = []
        for index in sorted(self.resolved):
            mine = by_batch.get(index, [])
            batches.append({
                "batch_index": index,
                "asset_set_id": self.resolved[index]["asset_set_id"],
                "assets": self.resolved[index]["assets"],
                "accepted": sum(e["accepted"] for e in mine),
                "attempted": len(mine),
            })
        assets: dict[tuple[str, str], dict[str, Any]] = {}
        for batch in batches:
            for role, asset in sorted(batch["assets"].items()):
                sha = str(asset["content_sha256"])
                item = assets.setdefault((role, sha), {
                    "role": role, "asset_id": asset["asset_id"], "content_sha256": sha,
                    "snapshot_dir": self.snapshot_dirs.get(sha), "batches": [],
                    "accepted": 0, "attempted": 0,
                })
                item["batches"].append(batch["batch_index"])
                item["accepted"] += batch["accepted"]
                item["attempted"] += batch["attempted"]
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "run_id": self.created.get("run_id"),
            "task_id": self.created.get("task_id"),
            "output_dir": self.created.get("output_dir"),
            "state": self.state,
            "events": self.count,
            "first_event_at": self.first_at,
            "last_event_at": self.last_at,
            "accepted": sum(e["accepted"] for e in done),
            "attempted": len(done),
            "batches": batches,
            "assets": [assets[k] for k in sorted(assets)],
            "rejections": {stage: dict(sorted(c.items())) for stage, c in rejections.items()},
            "episodes": done,
            "sessions": _sessions(forensic),
        }


def run_report(events: Iterable[EventLike]) -> dict[str, Any]:
    """:meth:`RunReport.report` of a whole log (events in seq order)."""
    projector, forensic = RunReport(), ForensicsProjector()
    for event in events:
        projector.apply(event)
        forensic.apply(event)
    return projector.report(forensic)
