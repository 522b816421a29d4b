"""The lifecycle machine: legal paths, resume targets, terminal completion."""

from __future__ import annotations

import pytest

from domain.lifecycle import Lifecycle, phase_of


def drive(*events: str) -> Lifecycle:
    machine = Lifecycle()
    for event in events:
        reason = machine.fire(event)
        assert reason is None, f"{event}: {reason}"
    return machine


def test_happy_path() -> None:
    m = drive("RunCreated", "PreparationCompleted", "CollectionStarted", "RunCompleted")
    assert m.state == "completed"


@pytest.mark.parametrize(
    ("path", "failed_from"),
    [
        (("RunCreated",), "preparing"),
        (("RunCreated", "PreparationCompleted"), "prepared"),
        (("RunCreated", "PreparationCompleted", "CollectionStarted"), "collecting"),
    ],
)
def test_resume_returns_to_the_phase_that_failed(path: tuple[str, ...], failed_from: str) -> None:
    m = drive(*path, "RunFailed")
    assert (m.state, m.failed_from) == ("failed", failed_from)
    assert m.resume_target() == failed_from
    assert m.fire("RunResumed") is None
    assert m.state == failed_from


def test_failure_while_failed_keeps_original_phase() -> None:
    m = drive("RunCreated", "PreparationCompleted", "CollectionStarted", "RunFailed", "RunFailed")
    assert m.failed_from == "collecting"
    assert phase_of(m.state, m.failed_from) == "collection"


def test_crash_resume_in_place() -> None:
    assert drive("RunCreated", "RunResumed").state == "preparing"
    m = drive("RunCreated", "PreparationCompleted", "CollectionStarted", "RunResumed")
    assert m.state == "collecting"
    assert m.fire("CollectionStarted") is None


def test_completed_is_terminal() -> None:
    m = drive("RunCreated", "PreparationCompleted", "CollectionStarted", "RunCompleted")
    for event in ("RunFailed", "RunResumed", "CollectionStarted", "LeaseTakenOver",
                  "EpisodeStarted"):
        assert m.fire(event) is not None
        assert m.state == "completed"


def test_phase_events_only_in_their_state() -> None:
    m = drive("RunCreated")
    assert m.fire("EpisodeStarted") == "accepted only in collecting"
    assert m.fire("BatchResolved") is None
    assert m.fire("RunCompleted") == "no 'complete' transition from preparing"
    m = drive("RunCreated", "PreparationCompleted")
    assert m.fire("BatchResolved") == "accepted only in preparing"
    assert m.fire("RunResumed") is not None  # prepared does not resume in place
    assert m.fire("LeaseTakenOver") is None
    assert Lifecycle().fire("PreparationStarted") is not None


def test_dataset_updates_are_legal_while_collecting_completed_or_failed() -> None:
    from domain.lifecycle import COLLECTING, COMPLETED, FAILED, PREPARED, Lifecycle

    machine = Lifecycle()
    for event in ("RunCreated", "PreparationCompleted"):
        assert machine.fire(event) is None
    assert machine.state == PREPARED
    assert machine.fire("DatasetUpdated") == "accepted only in collecting, completed, failed"
    assert machine.fire("CollectionStarted") is None
    assert machine.fire("DatasetUpdated") is None and machine.state == COLLECTING
    assert machine.fire("RunCompleted") is None
    assert machine.fire("DatasetUpdated") is None and machine.state == COMPLETED
    failed = Lifecycle()
    for event in ("RunCreated", "PreparationCompleted", "CollectionStarted", "RunFailed"):
        failed.fire(event)
    assert failed.fire("DatasetUpdated") is None and failed.state == FAILED
