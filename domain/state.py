"""Folding a run's events into its RunState, enforcing lifecycle and episode grammar.

The fold is the one place that decides what a log means: the store calls it before
appending (so illegal events never land) and on every read (so a log damaged by
other means is refused, not misread). Resume relies on the facts gathered here:
which batches were prepared, which episodes are done, which sessions ran.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from domain.errors import IllegalTransition
from domain.lifecycle import (
    ABSENT,
    ACCEPTING_STATES,
    COLLECTING,
    COMPLETED,
    PREPARED,
    PREPARING,
    TRIGGERS,
    Lifecycle,
    phase_of,
)

# Bump whenever the fold's meaning or RunState's shape changes: stored snapshots of an
# older fold version are then ignored and rebuilt from the log.
FOLD_VERSION = 3  # 3: open episodes per batch (interleaved batches), batch workers


class EventLike(Protocol):
    seq: int
    type: str
    payload: dict


@dataclass(slots=True)
class EpisodeState:
    """Facts of one episode; acceptance, reset, receipt and discard are kept apart."""

    batch_index: int
    episode_index: int
    seed: int
    session: int
    started_seq: int
    starts: int = 1
    stage: str = "started"
    initial_passed: bool | None = None
    executed: bool = False
    completed: bool | None = None
    judged: bool = False
    accepted: bool | None = None
    reason: str | None = None
    committed: dict | None = None
    discarded: str | None = None
    reset_submitted: bool = False

    @property
    def done(self) -> bool:
        """Done once its commit-or-discard is in the log; anything less is re-run."""
        return self.committed is not None or self.discarded is not None


@dataclass(slots=True)
class BatchState:
    """Preparation facts (resolution, deployment) and collection facts of one batch."""

    batch_index: int
    resolved: dict | None = None
    unresolvable: dict | None = None
    deployment: dict | None = None
    started: int = 0
    assets_replaced: dict | None = None
    finished: dict | None = None
    started_by: dict | None = None  # {"session_id", "worker"} of the latest BatchStarted naming one

    @property
    def asset_set_id(self) -> str | None:
        return self.resolved["asset_set_id"] if self.resolved else None

    @property
    def seed(self) -> int | None:
        return self.resolved["seed"] if self.resolved else None

    @property
    def materialized(self) -> bool:
        return self.deployment is not None


@dataclass(slots=True)
class RoleCandidates:
    """What preparation learned about one role's candidates."""

    listed: list[str] | None = None
    listing_failed: dict | None = None
    prepared: dict[str, dict] = field(default_factory=dict)
    rejected: list[dict] = field(default_factory=list)


@dataclass(slots=True)
class Session:
    """One process driving the run: started by PreparationStarted, CollectionStarted
    or RunResumed."""

    index: int
    kind: str
    session_id: str
    host: str
    pid: int
    seq: int


@dataclass(slots=True)
class EnvironmentFacts:
    """What one session logged about its simulator: every build (the environment is
    meant to be built once and reused across batches) and whether it was closed."""

    session_id: str
    built: list[dict] = field(default_factory=list)
    closed: dict | None = None


@dataclass
class RunState:
    """Projection of one run's log. ``version`` is the seq of the last folded event."""

    run_id: str
    state: str = ABSENT
    version: int = 0
    failed_from: str | None = None
    created: dict | None = None
    collection: dict | None = None
    preparation_completed: dict | None = None
    completed: dict | None = None
    failures: list[dict] = field(default_factory=list)
    batches: dict[int, BatchState] = field(default_factory=dict)
    episodes: dict[tuple[int, int], EpisodeState] = field(default_factory=dict)
    candidates: dict[str, RoleCandidates] = field(default_factory=dict)
    sessions: list[Session] = field(default_factory=list)
    environments: dict[str, EnvironmentFacts] = field(default_factory=dict)
    lease_takeovers: list[dict] = field(default_factory=list)
    datasets: list[dict] = field(default_factory=list)
    # batch -> its open episode (started, not yet reset). Batches run concurrently on several
    # workers, so each batch has its own grammar position; a new session abandons them all.
    open_episodes: dict[int, int] = field(default_factory=dict)
    first_collection: dict | None = None
    last_event_type: str | None = None
    resumes: int = 0
    batches_resolved: int = 0
    batches_finished: int = 0
    episodes_done: int = 0
    episodes_accepted: int = 0
    trajectories_committed: int = 0

    @property
    def phase(self) -> str | None:
        return phase_of(self.state, self.failed_from)

    @property
    def open_episode(self) -> tuple[int, int] | None:
        """The lowest open ``(batch, episode)``, None when no episode is open."""
        if not self.open_episodes:
            return None
        batch = min(self.open_episodes)
        return batch, self.open_episodes[batch]

    @property
    def goal(self) -> str | None:
        return self.created["goal"] if self.created else None

    @property
    def config(self) -> dict | None:
        return self.created["config"] if self.created else None

    @property
    def session(self) -> int:
        """Index of the current session (0 before any session started)."""
        return len(self.sessions)

    def batch(self, batch_index: int) -> BatchState:
        found = self.batches.get(batch_index)
        if found is None:
            found = self.batches[batch_index] = BatchState(batch_index)
        return found

    @property
    def batches_total(self) -> int | None:
        """Batches preparation produced, or (before it completed) the configured count."""
        if self.preparation_completed is not None:
            return self.preparation_completed.get("batches")
        return (self.config or {}).get("max_batches")

    def done_episodes(self, batch_index: int) -> list[EpisodeState]:
        return [
            e for (b, _), e in sorted(self.episodes.items()) if b == batch_index and e.done
        ]


class _Illegal(Exception):
    """Internal: a grammar reason, turned into IllegalTransition with run/seq/state."""


# Stage an episode must be in for each grammar event, and the stage it moves to.
_AFTER_INITIAL = "initial"
_EPISODE_STEPS: dict[str, tuple[frozenset[str], str]] = {
    "InitialChecked": (frozenset({"started"}), _AFTER_INITIAL),
    "EpisodeExecuted": (frozenset({_AFTER_INITIAL}), "executed"),
    "EpisodeJudged": (frozenset({_AFTER_INITIAL, "executed"}), "judged"),
    "TrajectoryCommitted": (frozenset({"judged"}), "finished"),
    "TrajectoryDiscarded": (frozenset({"judged"}), "finished"),
    "ResetSubmitted": (frozenset({"finished"}), "reset"),
}


class Folder:
    """Incremental fold: holds one machine and applies events one at a time."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.lifecycle = Lifecycle()
        self.state = RunState(run_id)
        self._handlers = {
            "RunCreated": self._run_created,
            "PreparationStarted": self._session_started,
            "CandidatesListed": self._candidates_listed,
            "CandidateListingFailed": self._listing_failed,
            "CandidatePrepared": self._candidate_prepared,
            "CandidateRejected": self._candidate_rejected,
            "BatchResolved": self._batch_resolved,
            "BatchUnresolvable": self._batch_unresolvable,
            "DeploymentMaterialized": self._deployment,
            "PreparationCompleted": self._preparation_completed,
            "CollectionStarted": self._collection_started,
            "EnvironmentBuilt": self._environment_built,
            "BatchStarted": self._batch_started,
            "AssetsReplaced": self._assets_replaced,
            "EpisodeStarted": self._episode_started,
            "InitialChecked": self._episode_step,
            "EpisodeExecuted": self._episode_step,
            "EpisodeJudged": self._episode_step,
            "TrajectoryCommitted": self._episode_step,
            "TrajectoryDiscarded": self._episode_step,
            "ResetSubmitted": self._episode_step,
            "BatchFinished": self._batch_finished,
            "EnvironmentClosed": self._environment_closed,
            "RunCompleted": self._run_completed,
            "RunFailed": self._run_failed,
            "RunResumed": self._run_resumed,
            "LeaseTakenOver": self._lease_taken_over,
            "DatasetUpdated": self._dataset_updated,
            "CommittedFilesRepaired": self._files_repaired,
        }

    def apply(self, seq: int, event_type: str, payload: dict) -> None:
        """Apply one (already schema-validated) event or raise IllegalTransition."""
        st = self.state
        before = st.state
        if seq != st.version + 1:
            self._raise(seq, event_type, before, f"expected seq {st.version + 1}")
        handler = self._handlers.get(event_type)
        if handler is None:
            self._raise(seq, event_type, before, "unknown event type")
        try:
            handler(seq, event_type, payload)  # type: ignore[misc]
            reason = self.lifecycle.fire(event_type)
            if reason is not None:
                raise _Illegal(reason)
        except _Illegal as exc:
            self._raise(seq, event_type, before, str(exc))
        st.state = self.lifecycle.state
        st.failed_from = self.lifecycle.failed_from
        st.version = seq
        st.last_event_type = event_type

    def _raise(self, seq: int, event_type: str, state: str, reason: str) -> None:
        raise IllegalTransition(
            f"run {self.run_id!r} seq {seq}: {event_type} is illegal in state {state}: {reason}"
        )

    # -- lifecycle -----------------------------------------------------------------
    def _run_created(self, seq: int, _t: str, p: dict) -> None:
        if p["run_id"] != self.run_id:
            raise _Illegal(f"payload run_id {p['run_id']!r} does not match the run")
        if self.lifecycle.state == ABSENT:
            self.state.created = p

    def _preparation_completed(self, seq: int, _t: str, p: dict) -> None:
        if self.lifecycle.state == PREPARING:
            self.state.preparation_completed = p

    def _session_started(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            st = self.state
            st.sessions.append(
                Session(len(st.sessions) + 1, t, p["session_id"], p["host"], p["pid"], seq)
            )
            st.open_episodes = {}

    def _collection_started(self, seq: int, t: str, p: dict) -> None:
        if self.lifecycle.state in (PREPARED, COLLECTING):
            self.state.collection = p
            if self.state.first_collection is None:
                self.state.first_collection = p
            self._session_started(seq, t, p)

    def _run_resumed(self, seq: int, t: str, p: dict) -> None:
        current = self.lifecycle.state
        target = self.lifecycle.resume_target()
        if p["from_state"] != current:
            raise _Illegal(f"from_state {p['from_state']!r} does not match the run state")
        if target is not None and p["to_state"] != target:
            raise _Illegal(f"to_state {p['to_state']!r} but the run resumes to {target}")
        if target is not None:
            self._session_started(seq, t, p)
            self.state.resumes += 1

    def _run_completed(self, seq: int, _t: str, p: dict) -> None:
        st = self.state
        if self.lifecycle.state == COLLECTING:
            if st.open_episodes:
                raise _Illegal(f"episode {st.open_episode} is still open")
            st.completed = p

    def _run_failed(self, seq: int, _t: str, p: dict) -> None:
        if self.lifecycle.state not in (COMPLETED, ABSENT):
            self.state.failures.append({**p, "seq": seq})

    def _lease_taken_over(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            self.state.lease_takeovers.append({**p, "seq": seq})

    def _dataset_updated(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            if p["log_position"] >= seq:
                raise _Illegal(
                    f"log_position {p['log_position']} is not before the event itself"
                )
            self.state.datasets.append({**p, "seq": seq})

    def _files_repaired(self, seq: int, t: str, p: dict) -> None:
        """A repair may only name bytes the log already vouches for: each restored file must
        be one of its committed episode's files, with that receipt's size and SHA-256. It
        adds no fact to the state (the receipts stand as they were)."""
        if not self._accepts(t):
            return
        episodes = p["episodes"]
        if not episodes:
            raise _Illegal("a repair names no episode")
        for entry in episodes:
            key = _repaired_key(entry)
            episode = self.state.episodes.get(key)
            if episode is None or episode.committed is None:
                raise _Illegal(f"episode {key} is not committed; there is nothing to repair")
            receipts = {str(episode.committed["path"]): episode.committed}
            for camera_file in episode.committed.get("files") or ():
                receipts[str(camera_file["path"])] = camera_file
            files = entry.get("files")
            if not isinstance(files, list) or not files:
                raise _Illegal(f"episode {key}: a repair lists no restored file")
            for restored in files:
                path = restored.get("path") if isinstance(restored, dict) else None
                receipt = receipts.get(str(path))
                if receipt is None:
                    raise _Illegal(f"episode {key}: {path!r} is not one of its committed files")
                if (restored.get("bytes"), restored.get("sha256")) != (
                    receipt["bytes"], receipt["sha256"]
                ):
                    raise _Illegal(
                        f"episode {key}: restored {path} differs from its committed receipt"
                    )

    def _accepts(self, event_type: str) -> bool:
        # Facts are recorded only for events the machine will accept; the machine
        # itself produces the refusal reason afterwards.
        if event_type in TRIGGERS:
            return True
        return self.lifecycle.state in ACCEPTING_STATES[event_type]

    # -- preparation ---------------------------------------------------------------
    def _role(self, role: str) -> RoleCandidates:
        found = self.state.candidates.get(role)
        if found is None:
            found = self.state.candidates[role] = RoleCandidates()
        return found

    def _candidates_listed(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            self._role(p["role"]).listed = list(p["candidate_ids"])

    def _listing_failed(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            self._role(p["role"]).listing_failed = p

    def _candidate_prepared(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            self._role(p["role"]).prepared[p["candidate_id"]] = p

    def _candidate_rejected(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            self._role(p["role"]).rejected.append(p)

    def _batch_resolved(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            batch = self.state.batch(p["batch_index"])
            self.state.batches_resolved += batch.resolved is None
            batch.resolved = p

    def _batch_unresolvable(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            self.state.batch(p["batch_index"]).unresolvable = p

    def _deployment(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            batch = self.state.batches.get(p["batch_index"])
            if batch is None or batch.resolved is None:
                raise _Illegal(f"batch {p['batch_index']} was never resolved")
            batch.deployment = p

    # -- collection ----------------------------------------------------------------
    def _environment(self, session_id: str) -> EnvironmentFacts:
        found = self.state.environments.get(session_id)
        if found is None:
            found = self.state.environments[session_id] = EnvironmentFacts(session_id)
        return found

    def _environment_built(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            self._environment(p["session_id"]).built.append(p)

    def _environment_closed(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            self._environment(p["session_id"]).closed = p

    def _batch_started(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            b = p["batch_index"]
            batch = self.state.batch(b)
            if batch.finished is not None:
                raise _Illegal(f"batch {b} already finished")
            self._require_no_open_episode(b)
            self._require_current_session(p)
            batch.started += 1
            if "worker" in p or "session_id" in p:
                batch.started_by = {
                    "session_id": p.get("session_id"), "worker": p.get("worker")
                }
            else:
                batch.started_by = None

    def _assets_replaced(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            self._open_batch(p["batch_index"]).assets_replaced = p

    def _batch_finished(self, seq: int, t: str, p: dict) -> None:
        if self._accepts(t):
            b = p["batch_index"]
            batch = self._open_batch(b)
            self._require_no_open_episode(b)
            self._require_current_session(p)
            worker, by = p.get("worker"), batch.started_by
            if worker is not None and by is not None and by["worker"] not in (None, worker):
                raise _Illegal(
                    f"batch {b} was started by worker {by['worker']!r}, not {worker!r}"
                )
            batch.finished = p
            self.state.batches_finished += 1

    def _require_no_open_episode(self, batch_index: int) -> None:
        open_index = self.state.open_episodes.get(batch_index)
        if open_index is not None:
            raise _Illegal(f"episode {(batch_index, open_index)} is still open")

    def _require_current_session(self, p: dict) -> None:
        """A batch event naming its session must name the session driving the run now."""
        session_id = p.get("session_id")
        sessions = self.state.sessions
        if session_id is not None and (not sessions or sessions[-1].session_id != session_id):
            current = sessions[-1].session_id if sessions else None
            raise _Illegal(f"session_id {session_id!r} is not the current session {current!r}")

    def _open_batch(self, batch_index: int) -> BatchState:
        batch = self.state.batches.get(batch_index)
        if batch is None or not batch.started:
            raise _Illegal(f"batch {batch_index} was not started")
        if batch.finished is not None:
            raise _Illegal(f"batch {batch_index} already finished")
        return batch

    def _episode_started(self, seq: int, t: str, p: dict) -> None:
        if not self._accepts(t):
            return
        st = self.state
        key = (p["batch_index"], p["episode_index"])
        self._open_batch(key[0])
        self._require_no_open_episode(key[0])
        previous = st.episodes.get(key)
        if previous is not None:
            if previous.done:
                raise _Illegal(f"episode {key} is already done")
            if previous.session == st.session:
                raise _Illegal(
                    f"episode {key} was started in this session; restart needs a new session"
                )
            previous.starts += 1
            starts = previous.starts
        else:
            starts = 1
        st.episodes[key] = EpisodeState(
            key[0], key[1], p["seed"], st.session, seq, starts=starts
        )
        st.open_episodes[key[0]] = key[1]

    def _episode_step(self, seq: int, t: str, p: dict) -> None:
        if not self._accepts(t):
            return
        st = self.state
        key = (p["batch_index"], p["episode_index"])
        if st.open_episodes.get(key[0]) != key[1]:
            current = st.open_episodes.get(key[0])
            open_key = (key[0], current) if current is not None else None
            raise _Illegal(
                f"episode {key} is not the open episode of batch {key[0]} ({open_key})"
            )
        ep = st.episodes[key]
        allowed, next_stage = _EPISODE_STEPS[t]
        if ep.stage not in allowed:
            raise _Illegal(f"episode {key} is at stage {ep.stage!r}")
        if t == "InitialChecked":
            ep.initial_passed = p["passed"]
        elif t == "EpisodeExecuted":
            if not ep.initial_passed:
                raise _Illegal(f"episode {key} failed its initial checks; it cannot be executed")
            ep.executed = True
            ep.completed = p["completed"]
        elif t == "EpisodeJudged":
            if ep.initial_passed and not ep.executed:
                raise _Illegal(f"episode {key} passed its initial checks but was not executed")
            if p["accepted"] and not (ep.initial_passed and ep.completed):
                raise _Illegal(
                    f"episode {key} cannot be accepted without passed initial checks "
                    "and a completed program"
                )
            ep.judged = True
            ep.accepted = p["accepted"]
            ep.reason = p["reason"]
        elif t == "TrajectoryCommitted":
            if not ep.accepted:
                raise _Illegal(f"episode {key} was rejected; only an accepted one is committed")
            ep.committed = p
            self._count_done(ep)
            st.trajectories_committed += 1
        elif t == "TrajectoryDiscarded":
            ep.discarded = p["reason"]
            self._count_done(ep)
        else:  # ResetSubmitted ends the episode
            ep.reset_submitted = True
            del st.open_episodes[key[0]]
        ep.stage = next_stage

    def _count_done(self, ep: EpisodeState) -> None:
        self.state.episodes_done += 1
        self.state.episodes_accepted += bool(ep.accepted)


def _repaired_key(entry: object) -> tuple[int, int]:
    if not isinstance(entry, dict):
        raise _Illegal("a repaired episode must be an object")
    b, j = entry.get("batch_index"), entry.get("episode_index")
    if type(b) is not int or type(j) is not int:
        raise _Illegal("a repaired episode needs integer batch_index and episode_index")
    return b, j


def fold(run_id: str, events: Iterable[EventLike]) -> RunState:
    """Replay ``events`` (ordered by seq) through the lifecycle; raise on the first
    illegal one. Stores fold incrementally through their own ``Folder`` instead."""
    folder = Folder(run_id)
    apply = folder.apply
    for event in events:
        apply(event.seq, event.type, event.payload)
    return folder.state
