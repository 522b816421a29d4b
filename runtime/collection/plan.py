"""What a collection session has left to do, read from the run's event log alone.

The log is the only memory between sessions: which deployments preparation produced (and the
manifest digest each must still match), the configuration the run was created with, the
episodes-per-batch and recording choice fixed by the *first* collection session, and which
episodes are already done (their commit-or-discard is logged). Anything less than done is
re-run from its start, which is exactly the grammar the fold enforces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from domain.errors import AssetcastInputError
from runtime.seeds import batch_seed


class CollectionRefused(AssetcastInputError):
    """The run cannot be collected as asked (wrong state, conflicting options, no batches)."""


@dataclass(frozen=True)
class BatchPlan:
    batch_index: int
    asset_set_id: str
    seed: int
    deployment_path: Path
    manifest_sha256: str


@dataclass(frozen=True)
class EpisodeRecord:
    """A done episode as the log knows it."""

    accepted: bool
    committed: Mapping[str, Any] | None  # TrajectoryCommitted payload
    reset_submitted: bool


@dataclass
class CollectionPlan:
    run_id: str
    goal: str
    output_dir: Path
    config: Mapping[str, Any]
    batches: tuple[BatchPlan, ...]
    episodes_per_batch: int
    record_trajectory: bool
    done: dict[tuple[int, int], EpisodeRecord] = field(default_factory=dict)
    finished_batches: set[int] = field(default_factory=set)
    sessions: int = 0
    # batch -> [accepted, attempted]; kept by record_done so counts never rescan ``done``.
    _counts: dict[int, list[int]] = field(default_factory=dict, repr=False)

    @property
    def settle_steps(self) -> int:
        return int(self.config.get("settle_steps", 0))

    def pending_batches(self) -> tuple[BatchPlan, ...]:
        return tuple(b for b in self.batches if b.batch_index not in self.finished_batches)

    def is_done(self, batch_index: int, episode_index: int) -> bool:
        return (batch_index, episode_index) in self.done

    def batch_counts(self, batch_index: int) -> tuple[int, int]:
        """(accepted, attempted) over every done episode of the batch, across sessions."""
        accepted, attempted = self._counts.get(batch_index, (0, 0))
        return accepted, attempted

    def totals(self) -> tuple[int, int]:
        counts = self._counts.values()
        return sum(c[0] for c in counts), sum(c[1] for c in counts)

    def committed(self) -> dict[tuple[int, int], Mapping[str, Any]]:
        return {key: r.committed for key, r in self.done.items() if r.committed is not None}

    def record_done(self, batch_index: int, episode_index: int, record: EpisodeRecord) -> None:
        key = (batch_index, episode_index)
        counts = self._counts.setdefault(batch_index, [0, 0])
        previous = self.done.get(key)
        if previous is not None:
            counts[0] -= previous.accepted
            counts[1] -= 1
        self.done[key] = record
        counts[0] += record.accepted
        counts[1] += 1


def read_plan(
    run_id: str, events: Sequence[Any], *, episodes_per_batch: int | None = None
) -> CollectionPlan:
    """:func:`plan_from_state` of the run folded from ``events``."""
    from domain.state import fold

    return plan_from_state(run_id, fold(run_id, events), episodes_per_batch=episodes_per_batch)


def plan_from_state(
    run_id: str, state: Any, *, episodes_per_batch: int | None = None
) -> CollectionPlan:
    """Build the plan from the run's folded state (the store loads it from its latest
    snapshot plus the tail, so this costs the same on day 1 and day 100);
    ``episodes_per_batch`` may override the config only before collection."""
    run = state.created
    if not run:
        raise CollectionRefused(f"run {run_id}: the log has no RunCreated event")
    config: Mapping[str, Any] = run["config"]
    deployments = {
        index: batch.deployment for index, batch in state.batches.items() if batch.deployment
    }
    if not deployments:
        raise CollectionRefused(f"run {run_id}: preparation materialized no deployment")
    output_dir = Path(run["output_dir"])
    base_seed = int(config.get("seed", 0))
    batches = []
    for index in sorted(deployments):
        item = deployments[index]
        path = Path(item["deployment_path"])
        batches.append(
            BatchPlan(
                batch_index=index,
                asset_set_id=item["asset_set_id"],
                seed=batch_seed(base_seed, index),
                deployment_path=path if path.is_absolute() else output_dir / path,
                manifest_sha256=item["manifest_sha256"],
            )
        )
    first = state.first_collection
    fixed_episodes = int(config.get("episodes_per_batch", 1))
    record = bool(config.get("record_trajectory", True))
    if first is not None:
        fixed_episodes = int(first["episodes_per_batch"])
        record = bool(first["record_trajectory"])
        if episodes_per_batch is not None and episodes_per_batch != fixed_episodes:
            raise CollectionRefused(
                f"run {run_id}: episodes_per_batch is fixed at {fixed_episodes} by its first "
                f"collection session, got {episodes_per_batch}"
            )
    elif episodes_per_batch is not None:
        if type(episodes_per_batch) is not int or not 1 <= episodes_per_batch <= 1_000_000:
            raise CollectionRefused(
                f"episodes_per_batch must be an integer in [1, 1000000], got {episodes_per_batch!r}"
            )
        fixed_episodes = episodes_per_batch
    plan = CollectionPlan(
        run_id=run_id,
        goal=str(run.get("goal", "prepare")),
        output_dir=output_dir,
        config=config,
        batches=tuple(batches),
        episodes_per_batch=fixed_episodes,
        record_trajectory=record,
        sessions=sum(1 for s in state.sessions if s.kind == "CollectionStarted"),
    )
    _record_done_episodes(plan, state.episodes)
    plan.finished_batches = {
        index for index, batch in state.batches.items() if batch.finished is not None
    }
    return plan


def _record_done_episodes(plan: CollectionPlan, episodes: Mapping[tuple[int, int], Any]) -> None:
    """``plan.record_done`` for every done episode of the fold, in one pass: a long run has
    ~10^5 of them, and resume pays for this before its first episode. The fold's keys are
    unique (no record replaces another) and a record without a receipt is shared by every
    episode with the same facts (records are frozen)."""
    done, counts = plan.done, plan._counts
    shared: dict[tuple[bool, bool], EpisodeRecord] = {}
    for key, episode in episodes.items():  # order is irrelevant: keyed lookups, counts
        if episode.committed is None and episode.discarded is None:
            continue  # not done: re-run from its start
        accepted = bool(episode.accepted)
        if episode.committed is None:
            facts = (accepted, episode.reset_submitted)
            record = shared.get(facts)
            if record is None:
                record = shared[facts] = EpisodeRecord(accepted, None, episode.reset_submitted)
        else:
            record = EpisodeRecord(accepted, dict(episode.committed), episode.reset_submitted)
        done[key] = record
        batch = counts.get(key[0])
        if batch is None:
            batch = counts[key[0]] = [0, 0]
        batch[0] += accepted
        batch[1] += 1
