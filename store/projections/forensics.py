"""Forensics: what happened to one run, reconstructed from its log alone.

After a crash or failure the first questions are: what state is the run in, which session
died without closing its simulator, which episode was in flight and how far it got, what
the recorded failure said, and who resumed or took over the run since. Each answer is
read off the event log, so the report is the same on any machine holding the ledger.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from store.projections.audit import EventLike, episode_key, event_time, lifecycle_state
from store.projections.incremental import Projector

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


def _with_stamp(event: EventLike) -> dict[str, Any]:
    return {**dict(event.payload), **_stamp(event)}


class ForensicsProjector(Projector):
    """The forensic report, accumulated one event at a time.

    Its state is bounded by the answer: sessions, failures, resumes and takeovers are
    listed in full; of the episodes only those still unfinished or started more than once
    are kept (a done episode started once never appears in the report).
    """

    KIND = "forensics"
    VERSION = 4  # 3: repairs, 4: session_ends

    def __init__(self) -> None:
        super().__init__()
        self.created: dict[str, Any] | None = None
        self.sessions: list[dict[str, Any]] = []
        # Recorded time of each session's ``last_seq`` event (the run report's session end;
        # kept beside the sessions so the forensic report itself is unchanged).
        self.session_ends: list[str | None] = []
        self.episodes: dict[tuple[int, int], dict[str, Any]] = {}
        self.failures: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.takeovers: list[dict[str, Any]] = []
        self.repairs: list[dict[str, Any]] = []
        self.state: str | None = None
        self.failed_from: str | None = None
        self.running: str | None = None
        self.count = 0
        self.last: dict[str, Any] | None = None
        # What locates the episode a killed collector was running, which the log holds
        # nothing of (an episode's events are appended once it is done): the plan's shape
        # and how many episodes of each batch are done (always a prefix: in order).
        self.batches = 0
        self.episodes_per_batch: int | None = None
        self.done_per_batch: dict[int, int] = {}

    def _apply(self, event: EventLike) -> None:
        kind, p = event.type, event.payload
        self.count += 1
        self.last = {"type": kind, "payload": dict(p), **_stamp(event)}
        if kind == "RunCreated" and self.created is None:
            self.created = dict(p)
        now = lifecycle_state([event])
        if kind == "RunFailed":
            self.failed_from = self.running
            self.failures.append(_with_stamp(event))
        elif kind == "RunResumed":
            self.resumes.append(_with_stamp(event))
        elif kind == "LeaseTakenOver":
            self.takeovers.append(_with_stamp(event))
        elif kind == "CommittedFilesRepaired":
            self.repairs.append(_with_stamp(event))
        if now is not None:
            self.state = self.running = now
        if kind == "PreparationCompleted":
            self.batches = int(p["batches"])
        elif kind == "CollectionStarted":
            self.episodes_per_batch = int(p["episodes_per_batch"])
        self._session(event)
        self._episode(event)
        if kind in ("TrajectoryCommitted", "TrajectoryDiscarded"):
            b = int(p["batch_index"])
            self.done_per_batch[b] = self.done_per_batch.get(b, 0) + 1

    def _next_episode(self) -> dict[str, int] | None:
        """The first episode, in plan order, that the log does not show done."""
        if self.episodes_per_batch is None:
            return None
        for b in range(self.batches):
            done = self.done_per_batch.get(b, 0)
            if done < self.episodes_per_batch:
                return {"batch_index": b, "episode_index": done}
        return None

    def _session(self, event: EventLike) -> None:
        kind, p = event.type, event.payload
        current = self.sessions[-1] if self.sessions else None
        if kind in _SESSION_STARTS or kind == "RunResumed":
            name = _SESSION_STARTS.get(kind, "resume")
            if current is not None and current["session_id"] == p.get("session_id"):
                current["kind"] = f"{current['kind']}+{name}"  # e.g. a resume that collects
                return
            if current is not None and current["ended_by"] is None:
                current["in_flight"] = self._in_flight(current)
            self.sessions.append({
                "session_id": p.get("session_id"),
                "kind": name,
                "host": p.get("host"),
                "pid": p.get("pid"),
                "started": _stamp(event),
                "environment_built": False,
                "environment_closed": None,
                "ended_by": None,
                "last_seq": event.seq,
                "in_flight": None,
            })
            self.session_ends.append(event_time(event))
            return
        if current is None:
            return
        current["last_seq"] = event.seq
        self.session_ends[-1] = event_time(event)
        if kind == "EnvironmentBuilt":
            current["environment_built"] = True
        elif kind == "EnvironmentClosed":
            current["environment_closed"] = {
                "ok": p.get("ok"),
                "error_type": p.get("error_type"),
                "detail": p.get("detail"),
                **_stamp(event),
            }
        elif kind in ("RunFailed", "RunCompleted", "PreparationCompleted"):
            current["ended_by"] = kind

    def _episode(self, event: EventLike) -> None:
        step = _EPISODE_STEPS.get(event.type)
        if step is None:
            return
        p = event.payload
        key = episode_key(p)
        entry = self.episodes.get(key)
        if step == "started":
            self.episodes[key] = {
                "batch_index": key[0],
                "episode_index": key[1],
                "seed": p.get("seed"),
                "started": _stamp(event),
                "attempts": (entry["attempts"] + 1) if entry else 1,
                "reached": "started",
                "last_event": {"type": event.type, **_stamp(event)},
            }
        elif entry is not None:
            entry["reached"] = step
            entry["last_event"] = {"type": event.type, **_stamp(event)}
            if step in _DONE_STEPS and entry["attempts"] == 1:
                del self.episodes[key]  # done, started once: never part of the report

    def _in_flight(self, session: dict[str, Any]) -> dict[str, Any] | None:
        """For a collection session that ended without a word: the episode it was on."""
        if "collection" not in session["kind"] or self.running != "collecting":
            return None
        return self._next_episode()

    def _dump(self) -> Any:
        return {
            "batches": self.batches, "episodes_per_batch": self.episodes_per_batch,
            "done_per_batch": [[b, n] for b, n in sorted(self.done_per_batch.items())],
            "created": self.created, "sessions": self.sessions,
            "session_ends": self.session_ends,
            "episodes": list(self.episodes.values()), "failures": self.failures,
            "resumes": self.resumes, "takeovers": self.takeovers, "repairs": self.repairs,
            "state": self.state,
            "failed_from": self.failed_from, "running": self.running, "count": self.count,
            "last": self.last,
        }

    def _restore(self, state: Any) -> None:
        self.created = state["created"]
        self.sessions = list(state["sessions"])
        self.session_ends = list(state["session_ends"])
        if len(self.session_ends) != len(self.sessions):
            raise ValueError("forensics snapshot: session_ends do not match the sessions")
        self.episodes = {(e["batch_index"], e["episode_index"]): e for e in state["episodes"]}
        self.failures = list(state["failures"])
        self.resumes = list(state["resumes"])
        self.takeovers = list(state["takeovers"])
        self.repairs = list(state["repairs"])
        self.state, self.failed_from = state["state"], state["failed_from"]
        self.running, self.count, self.last = state["running"], state["count"], state["last"]
        self.batches, self.episodes_per_batch = state["batches"], state["episodes_per_batch"]
        self.done_per_batch = {int(b): int(n) for b, n in state["done_per_batch"]}
        if type(self.count) is not int:
            raise ValueError("forensics snapshot: count is not an integer")

    def report(self) -> dict[str, Any]:
        created = self.created or {}
        sessions = [
            {**s, "crashed": s["ended_by"] is None,
             "may_be_live": s["ended_by"] is None and i == len(self.sessions) - 1}
            for i, s in enumerate(self.sessions)
        ]
        if sessions and sessions[-1]["may_be_live"]:
            sessions[-1]["in_flight"] = self._in_flight(sessions[-1])
        in_flight = next(
            ({**s["in_flight"], "session_id": s["session_id"]}
             for s in reversed(sessions) if s.get("in_flight")),
            None,
        )
        episodes = list(self.episodes.values())
        unfinished = [e for e in episodes if e["reached"] not in _DONE_STEPS]
        collection_sessions = [s for s in sessions if "collection" in s["kind"]]
        return {
            "schema_version": FORENSICS_SCHEMA_VERSION,
            "run_id": created.get("run_id"),
            "task_id": created.get("task_id"),
            "goal": created.get("goal"),
            "state": self.state,
            "failed_from": self.failed_from if self.state == "failed" else None,
            "events": self.count,
            "last_event": self.last,
            "sessions": sessions,
            "open_collection_sessions": [
                s for s in collection_sessions if not s["environment_closed"]
            ],
            "crashed_sessions": [s for s in sessions if s["crashed"]],
            "interrupted_episode": unfinished[-1] if unfinished else None,
            # The episode a collection session that died without a word was running: the
            # first one its log does not show done (the log holds nothing of an episode
            # until it is done; the last one or two done ones may not have reached it).
            "in_flight_episode": in_flight,
            "unfinished_episodes": unfinished,
            "restarted_episodes": [e for e in episodes if e["attempts"] > 1],
            "failure": self.failures[-1] if self.failures else None,
            "failures": self.failures,
            "resumes": self.resumes,
            "lease_takeovers": self.takeovers,
            "repairs": self.repairs,
        }


def forensics(events: Iterable[EventLike]) -> dict[str, Any]:
    """The forensic report of one run's log (events in seq order)."""
    projector = ForensicsProjector()
    for event in events:
        projector.apply(event)
    return projector.report()
