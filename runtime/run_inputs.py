"""A run's inputs checked before a session builds on them: its log, then the files it names.

The hash chain comes first (the cheap tail re-hash from its anchor): a log that was altered
cannot be trusted to say which deployments and snapshots to check. Then the deployments and
cache snapshots must match the digests the chain carries. Committed trajectories are checked
later, under the lease. The result, :class:`VerifiedInputs`, is handed on so the same
command does not check twice (the CLI checks before anything else reads the log).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domain.errors import AssetcastInputError


class RunDataAltered(AssetcastInputError):
    """A deployment or cache snapshot differs from the digests in the run's log."""


def require_intact_inputs(run_id: str, store: Any) -> None:
    """Deployments and cache snapshots must still match their chained digests before a
    session builds on them (committed trajectories are checked under the lease). Only the
    preparation prefix of the log names them, so only it is read."""
    from runtime.verify import preparation_prefix, verify_events

    events = preparation_prefix(store.iter_events(run_id))
    result = verify_events(run_id, events, trajectories=False)
    if result.problems:
        more = len(result.problems) - 1
        raise RunDataAltered(
            f"run {run_id}: {result.problems[0]}"
            + (f" (and {more} more problem(s))" if more else "")
            + "; refusing to resume (see `assetcast verify`)"
        )


@dataclass(frozen=True)
class VerifiedInputs:
    """What :func:`verify_run_inputs` established about ``run_id``: its hash chain verifies
    and its deployments and cache snapshots match their chained digests. Handing it to
    :func:`resume` or :func:`repair_run` spares them checking again (the CLI checks first,
    to refuse a broken chain before anything else reads the log)."""

    run_id: str


def verify_run_inputs(run_id: str, store: Any) -> VerifiedInputs:
    """The checks before any session builds on ``run_id``: its chain from the anchor (the
    cheap tail re-hash, ``ChainBroken``), then its deployments and cache snapshots
    (``RunDataAltered``)."""
    store.require_intact_chain(run_id)
    require_intact_inputs(run_id, store)
    return VerifiedInputs(run_id)


def verified_or_check(run_id: str, store: Any, verified: VerifiedInputs | None) -> VerifiedInputs:
    """``verified`` if the caller checked this run already, else the checks now."""
    if verified is None:
        return verify_run_inputs(run_id, store)
    if verified.run_id != run_id:
        raise ValueError(f"inputs verified for run {verified.run_id}, not {run_id}")
    return verified
