"""The run lifecycle as a ``transitions`` state machine, driven by ledger events.

Only the handful of events that move a run between states fire machine triggers;
every other event is checked against the set of states that accept it (a dict
lookup). That keeps replaying a long log cheap while the machine stays the single
authority on how a run moves between states.
"""

from __future__ import annotations

from transitions import Machine, MachineError

ABSENT = "absent"
PREPARING = "preparing"
PREPARED = "prepared"
COLLECTING = "collecting"
COMPLETED = "completed"
FAILED = "failed"

STATES: tuple[str, ...] = (PREPARING, PREPARED, COLLECTING, COMPLETED, FAILED)

# Events that fire a trigger of the machine.
TRIGGERS: dict[str, str] = {
    "RunCreated": "create",
    "PreparationCompleted": "finish_preparation",
    "CollectionStarted": "start_collection",
    "RunCompleted": "complete",
    "RunFailed": "fail",
    "RunResumed": "resume",
}

_PREPARATION_EVENTS = (
    "PreparationStarted", "CandidatesListed", "CandidateListingFailed", "CandidatePrepared",
    "CandidateRejected", "BatchResolved", "BatchUnresolvable", "DeploymentMaterialized",
)
_COLLECTION_EVENTS = (
    "EnvironmentBuilt", "BatchStarted", "AssetsReplaced", "EpisodeStarted", "InitialChecked",
    "EpisodeExecuted", "EpisodeJudged", "TrajectoryCommitted", "TrajectoryDiscarded",
    "ResetSubmitted", "BatchFinished",
)

# Non-trigger events -> states that accept them.
ACCEPTING_STATES: dict[str, frozenset[str]] = {
    **{name: frozenset({PREPARING}) for name in _PREPARATION_EVENTS},
    **{name: frozenset({COLLECTING}) for name in _COLLECTION_EVENTS},
    "LeaseTakenOver": frozenset({PREPARING, PREPARED, COLLECTING, FAILED}),
    "EnvironmentClosed": frozenset({PREPARING, PREPARED, COLLECTING, FAILED}),
    # A dataset is a projection of committed episodes: it can be (re)written while they are
    # collected, after the run completed, and from what a failed run did commit.
    "DatasetUpdated": frozenset({COLLECTING, COMPLETED, FAILED}),
    # A repair restores files of committed episodes, which exist from collecting on.
    "CommittedFilesRepaired": frozenset({COLLECTING, COMPLETED, FAILED}),
}

_TRANSITIONS = [
    {"trigger": "create", "source": ABSENT, "dest": PREPARING},
    {"trigger": "finish_preparation", "source": PREPARING, "dest": PREPARED},
    {"trigger": "start_collection", "source": [PREPARED, COLLECTING], "dest": COLLECTING},
    {"trigger": "complete", "source": COLLECTING, "dest": COMPLETED},
    # A failure while already failed (a resume attempt that broke before RunResumed)
    # keeps the original phase, so the run still resumes where the work stopped.
    {"trigger": "fail", "source": [PREPARING, PREPARED, COLLECTING], "dest": FAILED,
     "before": "_remember_failure"},
    {"trigger": "fail", "source": FAILED, "dest": FAILED},
    {"trigger": "resume", "source": PREPARING, "dest": PREPARING},
    {"trigger": "resume", "source": COLLECTING, "dest": COLLECTING},
    {"trigger": "resume", "source": FAILED, "dest": PREPARING, "conditions": "_failed_preparing"},
    {"trigger": "resume", "source": FAILED, "dest": PREPARED, "conditions": "_failed_prepared"},
    {"trigger": "resume", "source": FAILED, "dest": COLLECTING,
     "conditions": "_failed_collecting"},
]


class Lifecycle:
    """Model object of the machine: ``state`` plus the state a failure came from."""

    state: str

    def __init__(self) -> None:
        self.failed_from: str | None = None
        self._machine = Machine(
            model=self,
            states=[ABSENT, *STATES],
            transitions=_TRANSITIONS,
            initial=ABSENT,
            auto_transitions=False,
            ignore_invalid_triggers=False,
        )

    def _remember_failure(self) -> None:
        self.failed_from = self.state

    def _failed_preparing(self) -> bool:
        return self.failed_from == PREPARING

    def _failed_prepared(self) -> bool:
        return self.failed_from == PREPARED

    def _failed_collecting(self) -> bool:
        return self.failed_from == COLLECTING

    def fire(self, event_type: str) -> str | None:
        """Apply ``event_type``; return None if legal, else a reason why it is not.

        The caller owns the error message (it knows the run and seq), so this only
        reports; it never raises for an illegal event.
        """
        trigger = TRIGGERS.get(event_type)
        if trigger is None:
            accepting = ACCEPTING_STATES.get(event_type)
            if accepting is None:
                return "unknown event type"
            if self.state in accepting:
                return None
            return f"accepted only in {', '.join(sorted(accepting))}"
        before = self.state
        try:
            moved = self.trigger(trigger)
        except MachineError:
            return f"no '{trigger}' transition from {before}"
        if not moved:
            return f"no '{trigger}' transition from {before} (failed from {self.failed_from})"
        return None

    def restore(self, state: str, failed_from: str | None) -> None:
        """Put the machine where a stored snapshot says it was (the snapshot was made by
        replaying the same transitions, so no transition is re-checked here)."""
        if state not in (ABSENT, *STATES):
            raise ValueError(f"unknown lifecycle state {state!r}")
        self._machine.set_state(state)
        self.failed_from = failed_from

    def resume_target(self) -> str | None:
        """State a RunResumed would lead to now, or None if resuming is not possible."""
        if self.state in (PREPARING, COLLECTING):
            return self.state
        if self.state == FAILED:
            return self.failed_from
        return None


def phase_of(state: str, failed_from: str | None = None) -> str | None:
    """The phase of work a state belongs to: "preparation", "collection" or None."""
    if state == FAILED:
        state = failed_from or ""
    if state in (PREPARING, PREPARED):
        return "preparation"
    if state in (COLLECTING, COMPLETED):
        return "collection"
    return None
