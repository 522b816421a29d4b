"""What a run's log already holds about its preparation; resume skips exactly these facts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LoggedProgress:
    """What the log already holds; empty for a fresh run. Latest outcome per candidate wins."""

    listed: dict[str, list[str]] = field(default_factory=dict)
    listing_failed: set[str] = field(default_factory=set)
    outcomes: dict[str, dict[str, tuple[str, dict[str, Any]]]] = field(default_factory=dict)
    resolved: dict[int, dict[str, Any]] = field(default_factory=dict)
    materialized: dict[int, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_events(cls, events: Iterable[Any]) -> LoggedProgress:
        progress = cls()
        for event in events:
            kind, payload = event.type, event.payload
            if kind == "CandidatesListed":
                progress.listed[payload["role"]] = list(payload["candidate_ids"])
            elif kind == "CandidateListingFailed":
                progress.listing_failed.add(payload["role"])
            elif kind in ("CandidatePrepared", "CandidateRejected"):
                if payload.get("candidate_id") is not None:
                    outcome = "prepared" if kind == "CandidatePrepared" else "rejected"
                    progress.outcomes.setdefault(payload["role"], {})[payload["candidate_id"]] = (
                        outcome,
                        payload,
                    )
            elif kind == "BatchResolved":
                progress.resolved[payload["batch_index"]] = payload
            elif kind == "DeploymentMaterialized":
                progress.materialized[payload["batch_index"]] = payload
        return progress
