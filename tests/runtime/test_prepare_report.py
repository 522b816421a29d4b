"""The preparation report as a pure function of events (no store, no files)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from store.projections.preparation_report import preparation_report


@dataclass
class Ev:
    type: str
    payload: dict[str, Any]


CREATED = Ev("RunCreated", {"run_id": "run-x", "providers": {"item": {}, "bin": {}}})


def prepared(role: str, cid: str) -> Ev:
    return Ev("CandidatePrepared", {"role": role, "candidate_id": cid})


def rejected(role: str, cid: str, detail: str = "broken") -> Ev:
    return Ev(
        "CandidateRejected",
        {"role": role, "candidate_id": cid, "stage": "materialize", "error_type": "E",
         "detail": detail},
    )


def test_empty_run_is_preparing_with_every_role() -> None:
    assert preparation_report([CREATED]) == {
        "schema_version": 1,
        "run_id": "run-x",
        "roles": {"bin": {"prepared": 0, "rejections": []},
                  "item": {"prepared": 0, "rejections": []}},
        "batches": [],
        "status": "preparing",
    }


def test_failure_then_resume_then_completion() -> None:
    rejection = {"role": "item", "asset_id": "a", "code": "category_mismatch", "detail": "d",
                 "target_role": None}
    events = [
        CREATED,
        Ev("CandidateListingFailed", {"role": "bin", "error_type": "OSError", "detail": "gone"}),
        prepared("item", "a"),
        rejected("item", "b"),
        Ev("BatchUnresolvable", {"batch_index": 0, "rejections": [rejection]}),
        Ev("RunFailed", {"phase": "preparing", "error_type": "MatchingError", "detail": "none"}),
    ]
    failed = preparation_report(events)
    assert failed["status"] == "failed"
    assert failed["error_type"] == "MatchingError"
    assert failed["matching_rejections"] == [rejection]
    assert failed["roles"]["bin"]["rejections"] == [
        {"stage": "candidates", "error_type": "OSError", "detail": "gone"}
    ]
    assert failed["roles"]["item"] == {
        "prepared": 1,
        "rejections": [{"stage": "materialize", "candidate_id": "b", "error_type": "E",
                        "detail": "broken"}],
    }

    events += [
        Ev("RunResumed", {"from_state": "failed", "to_state": "preparing"}),
        prepared("item", "b"),  # the latest outcome of a candidate wins
    ]
    resumed = preparation_report(events)
    assert resumed["status"] == "preparing"
    assert "error_type" not in resumed and "matching_rejections" not in resumed
    assert resumed["roles"]["item"] == {"prepared": 2, "rejections": []}

    events += [
        Ev("DeploymentMaterialized", {"batch_index": 1, "asset_set_id": "s1",
                                      "deployment_path": "/o/batch_0001"}),
        Ev("DeploymentMaterialized", {"batch_index": 0, "asset_set_id": "s0",
                                      "deployment_path": "/o/batch_0000"}),
        Ev("PreparationCompleted", {"batches": 2}),
        Ev("RunFailed", {"phase": "collecting", "error_type": "X", "detail": "later"}),
    ]
    done = preparation_report(events)
    assert done["status"] == "prepared"  # collection failures are not preparation's story
    assert [b["batch_index"] for b in done["batches"]] == [0, 1]
