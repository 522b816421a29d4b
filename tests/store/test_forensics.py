"""Forensics projection over synthetic logs: crashes, failures, resumes, takeovers."""

from __future__ import annotations

from store.projections.forensics import forensics
from tests.store.test_audit import LogBuilder, completed_run, crashed_run, unresolvable_run


def test_crashed_collection_session_and_interrupted_episode() -> None:
    report = forensics(crashed_run("run-b"))
    assert report["run_id"] == "run-b"
    assert report["state"] == "collecting"
    assert report["last_event"]["type"] == "InitialChecked"
    [session] = report["open_collection_sessions"]
    assert session["session_id"] == "k" * 12
    assert session["environment_built"] and session["environment_closed"] is None
    assert session["crashed"] and session["may_be_live"]
    episode = report["interrupted_episode"]
    assert (episode["batch_index"], episode["episode_index"]) == (0, 1)
    assert episode["reached"] == "initial_checked"
    assert episode["last_event"]["type"] == "InitialChecked"
    assert report["failure"] is None and report["resumes"] == []


def test_resumed_and_completed_run_keeps_the_history() -> None:
    report = forensics(completed_run("run-a"))
    assert report["state"] == "completed"
    assert report["interrupted_episode"] is None
    kinds = [(s["session_id"][0], s["kind"], s["crashed"]) for s in report["sessions"]]
    assert kinds == [
        ("p", "preparation", False),
        ("s", "collection", True),  # the killed session: no close, no failure, no completion
        ("r", "resume+collection", False),
    ]
    assert [s["session_id"][0] for s in report["open_collection_sessions"]] == ["s"]
    [restarted] = report["restarted_episodes"]
    assert (restarted["batch_index"], restarted["episode_index"]) == (1, 0)
    assert restarted["attempts"] == 2
    [resume] = report["resumes"]
    assert (resume["from_state"], resume["to_state"]) == ("collecting", "collecting")


def test_failure_details_and_failed_from() -> None:
    report = forensics(unresolvable_run("run-c"))
    assert report["state"] == "failed"
    assert report["failed_from"] == "preparing"
    failure = report["failure"]
    assert failure["error_type"] == "PreparationFailed"
    assert failure["traceback"] == "Traceback ..."
    assert failure["phase"] == "preparing" and failure["batch_index"] == 0
    assert failure["seq"] == report["last_event"]["seq"]
    assert report["sessions"][0]["ended_by"] == "RunFailed"


def test_lease_takeover_is_reported() -> None:
    events = crashed_run("run-d")
    b = LogBuilder("run-d")
    b.events = list(events)
    b.add("LeaseTakenOver", previous_owner="k" * 12, previous_pid=2, previous_host="h",
          owner="n" * 12, pid=9, host="h")
    report = forensics(b.events)
    [takeover] = report["lease_takeovers"]
    assert (takeover["previous_pid"], takeover["pid"]) == (2, 9)
    assert takeover["seq"] == len(b.events)
