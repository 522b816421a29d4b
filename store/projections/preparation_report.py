"""``preparation.report.json`` as a pure projection of a run's events.

The report a user reads must never disagree with the ledger, so it is not accumulated while
preparing: it is recomputed from the log, and the file on disk is this function's output
written verbatim. Anyone can regenerate it from the store alone and compare byte for byte.

Only preparation facts contribute; collection events of the same run are ignored, and a
``RunResumed`` after a failure brings the status back to ``preparing`` (the failure is history,
still in the log, but no longer the run's current outcome).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

REPORT_SCHEMA_VERSION = 1


class _Event(Protocol):
    type: str
    payload: dict[str, Any]


def _listing_rejection(payload: dict[str, Any]) -> dict[str, Any]:
    return {"stage": "candidates", "error_type": payload["error_type"], "detail": payload["detail"]}


def _candidate_rejection(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "stage": payload["stage"],
        "candidate_id": payload.get("candidate_id"),
        "error_type": payload["error_type"],
        "detail": payload["detail"],
    }


class _Projection:
    """Mutable fold state; a candidate's latest outcome wins (a resumed run may re-prepare)."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.role_order: list[str] = []
        self.listing_failures: dict[str, list[dict[str, Any]]] = {}
        self.outcomes: dict[str, dict[str, tuple[str, dict[str, Any] | None]]] = {}
        self.batches: dict[int, dict[str, Any]] = {}
        self.status = "preparing"
        self.failure: dict[str, Any] = {}
        self.pending_rejections: list[dict[str, Any]] | None = None
        self.done = False

    def role(self, role: str) -> None:
        if role not in self.outcomes:
            self.role_order.append(role)
            self.outcomes[role] = {}
            self.listing_failures[role] = []

    def apply(self, event: _Event) -> None:
        kind, payload = event.type, event.payload
        if kind == "RunCreated":
            self.run_id = payload["run_id"]
            for role in sorted(payload["providers"]):
                self.role(role)
        elif self.done:
            return
        elif kind == "CandidateListingFailed":
            self.role(payload["role"])
            self.listing_failures[payload["role"]].append(_listing_rejection(payload))
        elif kind == "CandidatePrepared":
            self.role(payload["role"])
            self.outcomes[payload["role"]][payload["candidate_id"]] = ("prepared", None)
        elif kind == "CandidateRejected":
            self.role(payload["role"])
            key = payload.get("candidate_id") or f"#{len(self.outcomes[payload['role']])}"
            self.outcomes[payload["role"]][key] = ("rejected", _candidate_rejection(payload))
        elif kind == "DeploymentMaterialized":
            self.batches[payload["batch_index"]] = {
                "batch_index": payload["batch_index"],
                "asset_set_id": payload["asset_set_id"],
                "deployment_path": payload["deployment_path"],
            }
        elif kind == "BatchUnresolvable":
            self.pending_rejections = list(payload["rejections"])
        elif kind == "PreparationCompleted":
            self.status, self.failure, self.done = "prepared", {}, True
        elif kind == "RunFailed" and payload.get("phase") == "preparing":
            self.status = "failed"
            self.failure = {"error_type": payload["error_type"], "detail": payload["detail"]}
            if self.pending_rejections is not None:
                self.failure["matching_rejections"] = self.pending_rejections
        elif kind == "RunResumed" and payload.get("to_state") == "preparing":
            self.status, self.failure, self.pending_rejections = "preparing", {}, None

    def report(self) -> dict[str, Any]:
        roles: dict[str, Any] = {}
        for role in sorted(self.role_order):
            outcomes = self.outcomes[role].values()
            rejections = list(self.listing_failures[role])
            rejections += [entry for status, entry in outcomes if status == "rejected" and entry]
            roles[role] = {
                "prepared": sum(1 for status, _ in outcomes if status == "prepared"),
                "rejections": rejections,
            }
        report: dict[str, Any] = {
            "schema_version": REPORT_SCHEMA_VERSION,
            "run_id": self.run_id,
            "roles": roles,
            "batches": [self.batches[index] for index in sorted(self.batches)],
            "status": self.status,
        }
        report.update(self.failure)
        return report


def preparation_report(events: Iterable[_Event]) -> dict[str, Any]:
    """Project the events of one run (in sequence order) into the preparation report."""
    projection = _Projection()
    for event in events:
        projection.apply(event)
    return projection.report()
