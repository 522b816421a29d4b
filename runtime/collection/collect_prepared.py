"""The public entry point for a prepared run: `collect`, with the run's lease taken and released.

Everything that can be refused without recording anything (bad executor options, a hash
chain that does not verify, an unreachable Ray cluster) is refused before the lease is
taken; the session itself is :func:`runtime.collection.session_run.run_collection`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from domain.task import CheckSpec
from runtime.collection.environment import EnvironmentFactory
from runtime.collection.executors.options import ExecutorOptions
from runtime.collection.plan import CollectionRefused
from runtime.collection.results import CollectionResult
from runtime.collection.session_run import run_collection
from runtime.session import CollectorSession


def end_session(session: CollectorSession, error: BaseException | None) -> None:
    """Release the lease; a failure to do so is a note on ``error`` (or raised if none)."""
    try:
        session.close()
    except BaseException as release_error:
        if error is None:
            raise
        error.add_note(f"Releasing the run lease also failed: {release_error}")


@contextmanager
def leased_session(store: Any, run_id: str) -> Iterator[CollectorSession]:
    """The run's lease for the body of a ``with``, released however the body ends (see
    :func:`end_session`): every session that collects, resumes or repairs opens this way."""
    session = CollectorSession.open(store, run_id)
    try:
        yield session
    except BaseException as error:
        end_session(session, error)
        raise
    end_session(session, None)


def collect(
    run_id: str,
    *,
    store: Any,
    initial_checks: Sequence[CheckSpec] | None = None,
    final_checks: Sequence[CheckSpec] | None = None,
    environment_factory: EnvironmentFactory | None = None,
    episodes_per_batch: int | None = None,
    progress: bool = True,
    datasets: Sequence[Any] = (),
    workers: int = 1,
    ray_address: str | None = None,
    keep_rejected: bool = False,
    episode_deadline_s: float | None = None,
) -> CollectionResult:
    """Collect a prepared run: every batch, `episodes_per_batch` episodes each.

    ``keep_rejected``: a rejected episode's recorded trajectory (and camera files) is kept
    under ``rejected/run_<session>/`` and listed in its `TrajectoryDiscarded` (``kept``).

    The lease is taken first, so a second `collect`/`resume` of the same run while this one
    is alive is refused with ``LeaseHeld`` naming this session. An interrupted or failed
    collection is continued with ``runtime.resume.resume``, never with ``collect``.
    A run whose hash chain does not verify (the cheap check from its anchor,
    ``store.require_intact_chain``) is refused with ``ChainBroken`` before the lease is
    taken, so nothing (not even a ``LeaseTakenOver``) is appended to an altered log.

    ``environment_factory(deployment_dir, *, seed, settle_steps)`` replaces the MuJoCo
    environment; what it returns must offer ``reset(seed | None)``, ``replace_assets``,
    ``run_checks``, ``run_program`` and ``close`` (see ``EnvironmentFactory``).
    ``workers`` > 1 runs on a local Ray instance, ``ray_address`` on an existing cluster.
    """
    # exit 2 records nothing
    options = ExecutorOptions(workers, ray_address, episode_deadline_s).check()
    store.require_intact_chain(run_id)
    with options.connected():  # Ray up before the lease: unreachable is exit 2 too
        return collect_verified(
            run_id,
            store=store,
            initial_checks=initial_checks,
            final_checks=final_checks,
            environment_factory=environment_factory,
            episodes_per_batch=episodes_per_batch,
            progress=progress,
            datasets=datasets,
            workers=workers,
            ray_address=ray_address,
            keep_rejected=keep_rejected,
            episode_deadline_s=episode_deadline_s,
        )


def collect_verified(run_id: str, *, store: Any, **collect_kwargs: Any) -> CollectionResult:
    """:func:`collect` for a caller that already verified the chain and brought the executor
    up (resume, right after finishing the preparation it checked): the lease, then the
    session."""
    with leased_session(store, run_id) as session:
        state = store.state(run_id)
        if state.state != "prepared":
            hint = (
                "use resume to continue it"
                if state.state in ("collecting", "failed", "preparing")
                else "there is nothing left to collect"
            )
            raise CollectionRefused(f"run {run_id} is {state.state}, not prepared; {hint}")
        return run_collection(run_id, store=store, session=session, **collect_kwargs)
