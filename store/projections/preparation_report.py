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

from store.projections.incremental import Projector

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


class PreparationReport(Projector):
    """Mutable fold state; a candidate's latest outcome wins (a resumed run may re-prepare).

    Snapshotted like the collection report, so writing the report after a resumed
    preparation on a long log costs the tail; its state is per role and per candidate.
    """

    KIND = "preparation_report"
    VERSION = 1

    def __init__(self) -> None:
        super().__init__()
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

    def _apply(self, event: Any) -> None:
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

    def _dump(self) -> Any:
        # Candidates keep their first-seen order (the report lists rejections in it), so
        # they are stored as lists, never as JSON objects (whose keys are sorted).
        return {
            "run_id": self.run_id, "role_order": list(self.role_order),
            "listing_failures": [[r, f] for r, f in self.listing_failures.items()],
            "outcomes": [
                [role, [[key, status, entry] for key, (status, entry) in outcomes.items()]]
                for role, outcomes in self.outcomes.items()
            ],
            "batches": [[index, entry] for index, entry in self.batches.items()],
            "status": self.status, "failure": self.failure,
            "pending_rejections": self.pending_rejections, "done": self.done,
        }

    def _restore(self, state: Any) -> None:
        self.run_id = state["run_id"]
        self.role_order = [str(role) for role in state["role_order"]]
        self.listing_failures = {str(r): list(f) for r, f in state["listing_failures"]}
        self.outcomes = {
            str(role): {str(key): (str(status), entry) for key, status, entry in outcomes}
            for role, outcomes in state["outcomes"]
        }
        self.batches = {int(index): dict(entry) for index, entry in state["batches"]}
        self.status, self.failure = str(state["status"]), dict(state["failure"])
        pending = state["pending_rejections"]
        self.pending_rejections = None if pending is None else list(pending)
        if type(state["done"]) is not bool:
            raise ValueError("preparation_report snapshot: done is not a boolean")
        self.done = state["done"]

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
    projection = PreparationReport()
    for event in events:
        projection._apply(event)  # events here need no ``seq`` (a pure list of facts)
    return projection.report()
