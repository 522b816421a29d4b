"""The run report projection and the timing fields: counts per batch and asset, rejections
by stage, per-episode durations (a crash re-run replaces the interrupted attempt), sessions
with the crashed one marked; logs without timing fields still read and report None."""

from __future__ import annotations

import pytest

from domain.errors import EventSchemaError
from domain.events import validate_payload
from store import InMemoryEventStore, NewEvent
from store.projections.audit import audit
from store.projections.run_report import run_report
from tests.store.eventgen import batch_started, collection_started, created, episode, preparation


def _timed(events: list[NewEvent], base: float) -> list[NewEvent]:
    """Give an episode's events the timing fields collection writes."""
    out = []
    for i, event in enumerate(events):
        p = dict(event.payload)
        if event.type == "EpisodeStarted":
            p.update(started_at="2026-12-01T10:00:00.000000Z", reset_s=base)
        elif event.type != "TrajectoryDiscarded":
            p["duration_s"] = base * (i + 1)
        out.append(NewEvent(event.type, p))
    return out


def _failing(b: int, e: int, stage: str) -> list[NewEvent]:
    events = episode(b, e, accepted=False)
    k = {"batch_index": b, "episode_index": e}
    failed = [{"name": "on_table", "status": "failed", "detail": "", "metrics": {}}]
    if stage == "initial":
        return [events[0], NewEvent("InitialChecked", {**k, "passed": False, "checks": failed}),
                NewEvent("EpisodeJudged", {**k, "accepted": False, "checks": [],
                                           "reason": "initial_checks_failed"}),
                NewEvent("TrajectoryDiscarded", {**k, "reason": "initial_checks_failed"}),
                events[-1]]
    if stage == "program":
        return [events[0], events[1],
                NewEvent("EpisodeExecuted", {**k, "completed": False, "steps": 3, "detail": "",
                                             "skills": [{"skill": "pick", "completed": False}]}),
                NewEvent("EpisodeJudged", {**k, "accepted": False, "checks": [],
                                           "reason": "program_incomplete"}),
                NewEvent("TrajectoryDiscarded", {**k, "reason": "program_incomplete"}),
                events[-1]]
    return [*events[:3], NewEvent("EpisodeJudged", {**k, "accepted": False, "checks": failed,
                                                    "reason": "final_checks_failed"}),
            NewEvent("TrajectoryDiscarded", {**k, "reason": "final_checks_failed"}), events[-1]]


@pytest.fixture()
def store() -> InMemoryEventStore:
    s = InMemoryEventStore()
    prep = preparation(2)
    rejected = NewEvent("CandidateRejected", {
        "role": "item", "candidate_id": "c9", "stage": "materialize",
        "error_type": "AssetValidationError", "detail": "bad mesh",
    })
    v = s.append("r", [created("r"), prep[0], rejected, *prep[1:], collection_started(),
                       batch_started(0)], expected_version=0)
    v = s.append("r", _timed(episode(0, 0), 0.1), expected_version=v)
    v = s.append("r", _timed(episode(0, 1), 0.5)[:2], expected_version=v)  # then: crash
    v = s.append("r", [NewEvent("RunResumed", {
        "session_id": "s2", "host": "h", "pid": 2, "from_state": "collecting",
        "to_state": "collecting",
    })], expected_version=v)
    v = s.append("r", _timed(episode(0, 1), 0.2), expected_version=v)  # the re-run
    v = s.append("r", [NewEvent("BatchFinished", {"batch_index": 0, "accepted": 2,
                                                  "attempted": 2}), batch_started(1)],
                 expected_version=v)
    v = s.append("r", _failing(1, 0, "initial"), expected_version=v)
    v = s.append("r", _failing(1, 1, "program"), expected_version=v)
    s.append("r", _failing(1, 2, "final"), expected_version=v)  # an untimed (old) episode
    return s


def test_run_report_counts_stages_durations_and_sessions(store: InMemoryEventStore) -> None:
    report = run_report(store.read("r"))
    assert (report["accepted"], report["attempted"]) == (2, 5)
    assert [(b["batch_index"], b["accepted"], b["attempted"]) for b in report["batches"]] == [
        (0, 2, 2), (1, 0, 3),
    ]
    [asset] = report["assets"]  # eventgen resolves the same item asset for every batch
    assert (asset["role"], asset["batches"], asset["accepted"], asset["attempted"]) == (
        "item", [0, 1], 2, 5,
    )
    assert report["rejections"] == {
        "preparation": {"AssetValidationError": 1},
        "initial_checks": {"on_table": 1},
        "program": {"pick": 1},
        "final_checks": {"on_table": 1},
    }
    first, rerun, *rest = report["episodes"]
    assert first["phases"] == {
        "reset_s": 0.1, "initial_s": pytest.approx(0.2), "program_s": pytest.approx(0.3),
        "final_s": pytest.approx(0.4), "commit_s": pytest.approx(0.5),
        "reset_after_s": pytest.approx(0.6),
    }
    assert first["duration_s"] == pytest.approx(2.1)
    assert first["started_at"] == "2026-12-01T10:00:00.000000Z"
    assert rerun["duration_s"] == pytest.approx(0.2 * 21)  # not the crashed attempt's 0.5s
    assert rest[-1]["duration_s"] is None and rest[-1]["phases"] == {}
    sessions = report["sessions"]
    assert [(s["session_id"], s["crashed"]) for s in sessions] == [
        ("s-prep", False), ("s1", True), ("s2", True),
    ]
    assert sessions[2]["may_be_live"]


def test_audit_sums_measured_episode_time(store: InMemoryEventStore) -> None:
    [asset] = [a for a in audit(store)["assets"] if a["runs"]]
    assert (asset["episodes_attempted"], asset["episodes_timed"]) == (5, 2)  # 3 untimed
    assert asset["episode_seconds"] == pytest.approx(2.1 + 0.2 * 21)  # the re-run, not 0.5s


def test_timing_fields_are_optional_but_typed() -> None:
    k = {"batch_index": 0, "episode_index": 0}
    validate_payload("EpisodeStarted", {**k, "seed": 1})  # an old log
    validate_payload("EpisodeStarted", {**k, "seed": 1, "started_at": "t", "reset_s": 1})
    validate_payload("ResetSubmitted", {**k, "duration_s": 0.25})
    with pytest.raises(EventSchemaError, match="field duration_s must be number, got str"):
        validate_payload("ResetSubmitted", {**k, "duration_s": "0.25"})
    with pytest.raises(EventSchemaError, match="unknown field"):
        validate_payload("TrajectoryDiscarded", {**k, "reason": "x", "duration_s": 1.0})
    with pytest.raises(EventSchemaError, match="missing field"):
        validate_payload("EpisodeStarted", {**k, "started_at": "t"})
