"""Per role, what preparation did with its candidates: how many it saw (listed, and the
limit they were capped at), prepared and rejected, and the commonest rejection reasons.

A user whose run found no asset set, or fewer than expected, needs this first: a role whose
catalog was capped, or whose packages were all refused for one reason, explains most
surprises. It is a projection of the log (the latest outcome per candidate wins, as on
resume), so it says the same after a crash and resume as after a clean run.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

TOP_REASONS = 3
MAX_REASON_CHARS = 160
_LEADING_PATH = re.compile(r"^(?:[^\s:]*/[^\s:]*: )+")
_DIRECTORIES = re.compile(r"(?<![\w.])/(?:[^\s/:'\"]+/)+")


@dataclass
class RoleSummary:
    role: str
    listed: int = 0
    limit: int | None = None
    available: int | None = None  # packages the provider considered before the cap
    duplicates: int = 0
    prepared: int = 0
    rejected: int = 0
    listing_error: str | None = None
    reasons: Counter[str] = field(default_factory=Counter)

    def top_reasons(self, count: int = TOP_REASONS) -> list[tuple[str, int]]:
        """Commonest first, ties alphabetical (stable output)."""
        return sorted(self.reasons.items(), key=lambda item: (-item[1], item[0]))[:count]


def rejection_reason(error_type: str, detail: str) -> str:
    """The part of a rejection that recurs across packages: the package path each message
    starts with is dropped and paths inside it are cut to their file name, so ten packages
    refused for the same cause count as one reason."""
    text = _DIRECTORIES.sub("", _LEADING_PATH.sub("", " ".join(str(detail).split())))
    reason = text or error_type
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS - 3] + "..."
    return reason


def role_summaries(events: Iterable[Any]) -> list[RoleSummary]:
    """One summary per role, sorted by role name."""
    roles: dict[str, RoleSummary] = {}
    outcomes: dict[str, dict[str, tuple[str, str | None]]] = {}

    def role(name: str) -> RoleSummary:
        return roles.setdefault(name, RoleSummary(name))

    for event in events:
        kind, payload = event.type, event.payload
        if kind == "RunCreated":
            for name in payload["providers"]:
                role(name)
        elif kind == "CandidatesListed":
            summary = role(payload["role"])
            summary.listed, summary.limit = len(payload["candidate_ids"]), int(payload["limit"])
            summary.available = payload.get("available")
            summary.duplicates = int(payload.get("duplicates", 0))
        elif kind == "CandidateListingFailed":
            role(payload["role"]).listing_error = f"{payload['error_type']}: {payload['detail']}"
        elif kind in ("CandidatePrepared", "CandidateRejected"):
            key = payload.get("candidate_id") or f"#{event.seq}"
            reason = None
            if kind == "CandidateRejected":
                reason = rejection_reason(str(payload["error_type"]), str(payload["detail"]))
            outcomes.setdefault(payload["role"], {})[key] = (kind, reason)
    for name, per_candidate in outcomes.items():
        summary = role(name)
        for kind, reason in per_candidate.values():
            if kind == "CandidatePrepared":
                summary.prepared += 1
            else:
                summary.rejected += 1
                summary.reasons[str(reason)] += 1
    return [roles[name] for name in sorted(roles)]


def summary_lines(summaries: Iterable[RoleSummary]) -> list[str]:
    """The lines ``prepare`` prints (one per role, then its top reasons indented)."""
    lines = []
    for summary in summaries:
        if summary.listing_error is not None:
            lines.append(f"role {summary.role}: listing failed: {summary.listing_error}")
            continue
        notes = []
        sampled = summary.available is not None and summary.available > summary.listed
        if sampled or (summary.available is None and summary.listed == summary.limit):
            notes.append(f"limit {summary.limit}")
        if summary.duplicates:
            notes.append(f"{summary.duplicates} duplicate(s) listed once")
        noted = f" ({'; '.join(notes)})" if notes else ""
        of = f" of {summary.available}" if sampled else ""
        lines.append(
            f"role {summary.role}: saw {summary.listed}{of} candidate(s){noted}, "
            f"prepared {summary.prepared}, rejected {summary.rejected}"
        )
        for reason, count in summary.top_reasons():
            lines.append(f"  {count} x {reason}")
        more = len(summary.reasons) - TOP_REASONS
        if more > 0:
            lines.append(f"  ... and {more} other reason(s); see preparation.report.json")
    return lines
