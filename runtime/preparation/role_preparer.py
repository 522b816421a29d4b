"""One role's pool of prepared assets. On a fresh run it lists and materializes; on resume
it trusts the logged candidate ids, reuses snapshots that still verify, and appends only the
facts the log does not hold yet."""

from __future__ import annotations

from typing import Any

from domain.assets import (
    AssetCandidate,
    AssetProvider,
    AssetQuery,
    PreparationContext,
    PreparedAsset,
)
from domain.errors import SessionLost
from runtime.preparation.candidates import list_candidates, materialize_candidate, reuse_snapshot
from runtime.preparation.errors import ProviderMisbehaved
from runtime.preparation.ledger import Ledger
from runtime.preparation.logged_progress import LoggedProgress


class RolePreparer:
    """Prepares one role's pool, appending exactly the facts the log does not hold yet."""

    def __init__(
        self,
        ledger: Ledger,
        progress: LoggedProgress,
        role: str,
        provider: AssetProvider,
        query: AssetQuery,
        limit: int,
        context: PreparationContext,
    ) -> None:
        self.ledger, self.progress, self.role = ledger, progress, role
        self.provider, self.query, self.limit, self.context = provider, query, limit, context
        self._relisted: dict[str, AssetCandidate] | None = None

    def run(self) -> list[PreparedAsset]:
        if self.role in self.progress.listing_failed:
            return []
        logged = self.progress.listed.get(self.role)
        if logged is None:
            try:
                candidates = list_candidates(self.provider, self.query, self.limit)
            except Exception as error:
                self.ledger.emit(
                    "CandidateListingFailed",
                    {"role": self.role, "error_type": type(error).__name__, "detail": str(error)},
                )
                return []
            self._relisted = {c.candidate_id: c for c in candidates}
            logged = [c.candidate_id for c in candidates]
            self.ledger.emit(
                "CandidatesListed",
                {
                    "role": self.role,
                    "query": self.query.to_dict(),
                    "limit": self.limit,
                    "candidate_ids": logged,
                },
            )
        pool: list[PreparedAsset] = []
        outcomes = self.progress.outcomes.get(self.role, {})
        for candidate_id in logged:
            previous = outcomes.get(candidate_id)
            if previous is not None and previous[0] == "rejected":
                continue
            if previous is not None:
                reused = reuse_snapshot(previous[1])
                if reused is not None:
                    pool.append(reused)
                    continue
            prepared = self._prepare(candidate_id, previous[1] if previous else None)
            if prepared is not None:
                pool.append(prepared)
        return pool

    def _candidate(self, candidate_id: str) -> AssetCandidate:
        """The candidate object of a logged id; on resume the provider lists again."""
        if self._relisted is None:
            self._relisted = {}  # a failed re-listing is not retried for every candidate
            self._relisted = {
                c.candidate_id: c for c in list_candidates(self.provider, self.query, self.limit)
            }
        if candidate_id not in self._relisted:
            raise ProviderMisbehaved(
                f"candidate {candidate_id!r} is no longer listed by the provider"
            )
        return self._relisted[candidate_id]

    def _prepare(self, candidate_id: str, logged: dict[str, Any] | None) -> PreparedAsset | None:
        try:
            prepared = materialize_candidate(
                self.provider, self._candidate(candidate_id), self.context
            )
        except SessionLost:
            raise  # not the candidate's fault: this session may no longer record anything
        except Exception as error:
            self.ledger.emit(
                "CandidateRejected",
                {
                    "role": self.role,
                    "candidate_id": candidate_id,
                    "stage": "materialize",
                    "error_type": type(error).__name__,
                    "detail": str(error),
                },
            )
            return None
        payload = {
            "role": self.role,
            "candidate_id": candidate_id,
            "asset_id": prepared.asset_id,
            "content_sha256": prepared.content_sha256,
            "snapshot_dir": str(prepared.snapshot_dir),
        }
        if payload != logged:  # a repaired snapshot with identical facts needs no new event
            self.ledger.emit("CandidatePrepared", payload)
        return prepared
