"""One role's pool of prepared assets. On a fresh run it lists and materializes; on resume
it trusts the logged candidate ids, reuses snapshots that still verify, and appends only the
facts the log does not hold yet."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from domain.assets import (
    AssetCandidate,
    AssetProvider,
    AssetQuery,
    PreparationContext,
    PreparedAsset,
)
from runtime.preparation.candidates import list_candidates, listing_stats, reuse_snapshot
from runtime.preparation.errors import ProviderMisbehaved
from runtime.preparation.ledger import Ledger
from runtime.preparation.logged_progress import LoggedProgress
from runtime.preparation.parallel import MaterializerPool, Outcome


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
        pool: MaterializerPool | None = None,
        seed: int | None = None,
    ) -> None:
        self.ledger, self.progress, self.role = ledger, progress, role
        self.provider, self.query, self.limit, self.context = provider, query, limit, context
        self.pool, self.seed = pool, seed
        self._relisted: dict[str, AssetCandidate] | None = None

    def run(self) -> list[PreparedAsset]:
        if self.role in self.progress.listing_failed:
            return []
        logged = self.progress.listed.get(self.role)
        if logged is None:
            try:
                candidates = list_candidates(self.provider, self.query, self.limit, self.seed)
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
                    **listing_stats(self.provider, len(logged)),
                },
            )
        slots: list[PreparedAsset | None] = [None] * len(logged)
        pending: list[tuple[int, str, dict[str, Any] | None]] = []
        outcomes = self.progress.outcomes.get(self.role, {})
        for index, candidate_id in enumerate(logged):
            previous = outcomes.get(candidate_id)
            if previous is not None and previous[0] == "rejected":
                continue
            if previous is not None:
                reused = reuse_snapshot(previous[1])
                if reused is not None:
                    slots[index] = reused
                    continue
            pending.append((index, candidate_id, previous[1] if previous else None))
        ids = iter(pending)
        for chunk in self._outcome_chunks([candidate_id for _, candidate_id, _ in pending]):
            # A chunk's snapshots are durable when it arrives; its facts are one append.
            events: list[tuple[str, dict[str, Any]]] = []
            for outcome in chunk:
                index, candidate_id, logged_payload = next(ids)
                slots[index] = self._record(candidate_id, outcome, logged_payload, events)
            self.ledger.emit_all(events)
        return [asset for asset in slots if asset is not None]

    def _outcome_chunks(self, candidate_ids: list[str]) -> Iterator[list[Outcome]]:
        """Each pending candidate's outcome, in order and in chunks: a lookup failure at
        once, the rest materialized (by the pool when there is one); every snapshot of a
        chunk is durable by the time the chunk is yielded."""
        lookups: list[AssetCandidate | Outcome] = []
        for candidate_id in candidate_ids:
            try:
                lookups.append(self._candidate(candidate_id))
            except Exception as error:  # noqa: BLE001 - recorded as a rejection
                lookups.append((type(error).__name__, str(error)))
        wanted = [c for c in lookups if isinstance(c, AssetCandidate)]
        pool = self.pool or MaterializerPool()
        try:
            chunks = pool.materialize(self.provider, wanted, self.context)
            ready: deque[Outcome] = deque()
            group: list[Outcome] = []
            for lookup in lookups:
                if isinstance(lookup, AssetCandidate):
                    if not ready:
                        if group:  # what is ready goes out before waiting for more
                            yield group
                            group = []
                        ready.extend(next(chunks))
                    group.append(ready.popleft())
                else:
                    group.append(lookup)
            if group:
                yield group
        finally:
            if pool is not self.pool:
                pool.close()

    def _record(
        self, candidate_id: str, outcome: Outcome, logged: dict[str, Any] | None,
        events: list[tuple[str, dict[str, Any]]],
    ) -> PreparedAsset | None:
        """The outcome's asset (None for a rejection); its fact, if the log lacks it, is
        added to ``events``."""
        if not isinstance(outcome, PreparedAsset):
            error_type, detail = outcome
            events.append((
                "CandidateRejected",
                {
                    "role": self.role,
                    "candidate_id": candidate_id,
                    "stage": "materialize",
                    "error_type": error_type,
                    "detail": detail,
                },
            ))
            return None
        payload = {
            "role": self.role,
            "candidate_id": candidate_id,
            "asset_id": outcome.asset_id,
            "content_sha256": outcome.content_sha256,
            "snapshot_dir": str(outcome.snapshot_dir),
        }
        if payload != logged:  # a repaired snapshot with identical facts needs no new event
            events.append(("CandidatePrepared", payload))
        return outcome

    def _candidate(self, candidate_id: str) -> AssetCandidate:
        """The candidate object of a logged id; on resume the provider lists again."""
        if self._relisted is None:
            self._relisted = {}  # a failed re-listing is not retried for every candidate
            self._relisted = {
                c.candidate_id: c
                for c in list_candidates(self.provider, self.query, self.limit, self.seed)
            }
        if candidate_id not in self._relisted:
            raise ProviderMisbehaved(
                f"candidate {candidate_id!r} is no longer listed by the provider"
            )
        return self._relisted[candidate_id]
