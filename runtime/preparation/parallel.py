"""Materializing many candidates at once: a process pool across cores, results in order.

Why processes: copying, hashing, mesh checks and convex decomposition are CPU-bound Python
and numpy, so threads would share one core. Why ``spawn``: a forked child of a process that
ever created a GL context hangs, and a spawned worker inherits nothing.

What stays exactly as in a serial preparation: the facts and their order. Results come back
in the order the candidates were logged, and the caller appends their events in that order,
so a run prepared with a pool logs the same events as one prepared serially.

What changes is durability's cost, never its guarantee, and never who publishes: a worker
(or this process, with one worker and at least ``MIN_PARALLEL`` candidates) only *stages* a
snapshot (builds and verifies it in a temporary folder, without an fsync per file). The
process holding the lease publishes each chunk of results: one file-system sync for all
their folders, then per snapshot a fresh verification, the lease's fence check and the
rename, then one sync for the renames, and only then are their events appended.
Nothing is claimed in the log before it is on disk; a session that lost its lease publishes
nothing.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from multiprocessing import get_context
from typing import Any

import structlog

from domain.assets import AssetCandidate, AssetProvider, PreparationContext, PreparedAsset
from domain.errors import SessionLost

log = structlog.get_logger(__name__)

WORKERS_ENV = "ASSETCAST_PREPARE_WORKERS"
# Fewer candidates than this are prepared serially: starting spawned workers (each imports
# numpy, trimesh, scipy) costs more than it saves on a small catalog.
MIN_PARALLEL = 64
# Results published per durability pass (one sync before the renames, one after).
SYNC_CHUNK = 64

# (error_type, detail) for a failed materialization, else the PreparedAsset.
Outcome = PreparedAsset | tuple[str, str]


def worker_count(candidates: int) -> int:
    """Processes preparing ``candidates`` pending materializations at once, this one
    included: ``$ASSETCAST_PREPARE_WORKERS`` if set (1 = this process only), else one per
    core; 1 when there are too few to be worth it."""
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if raw:
        try:
            wanted = int(raw)
        except ValueError:
            raise ValueError(f"${WORKERS_ENV}: not an integer: {raw!r}") from None
        return max(1, min(wanted, candidates))
    if candidates < MIN_PARALLEL:
        return 1
    return max(1, min(os.cpu_count() or 1, candidates))


def _worker_init() -> None:
    from runtime.logging import configure_logging

    configure_logging(level="warning", json_lines=False)


def materialize_outcome(
    provider: AssetProvider, candidate: AssetCandidate, context: PreparationContext
) -> Outcome:
    """``provider.materialize`` with its contract checked; a failure becomes its
    (type name, message), which is all a rejection records. A lost lease is not the
    candidate's fault: it propagates."""
    from runtime.preparation.candidates import materialize_candidate

    try:
        return materialize_candidate(provider, candidate, context)
    except SessionLost:
        raise
    except Exception as error:  # noqa: BLE001 - recorded as a rejection, as serially
        return type(error).__name__, str(error)


@dataclass(frozen=True)
class _StagingTag:
    """A worker's stand-in for the session: it names temporary folders after the session
    (so only a dead session's leftovers are ever cleaned up) but can never publish."""

    tag: str

    def check(self) -> None:
        raise RuntimeError("a preparation worker stages snapshots; it never publishes one")


def _in_worker(
    job: tuple[AssetProvider, AssetCandidate, PreparationContext],
) -> tuple[Outcome, list[str]]:
    provider, candidate, context = job
    staging: list[str] = []
    outcome = materialize_outcome(provider, candidate, replace(context, staging=staging))
    return outcome, staging


class MaterializerPool:
    """A lazily started spawn pool shared by every role of one preparation."""

    def __init__(self) -> None:
        self._executor: Executor | None = None
        self._workers = 0

    def _pool(self, workers: int) -> Executor:
        if self._executor is None or workers > self._workers:
            self.close()
            self._executor = ProcessPoolExecutor(
                max_workers=workers, mp_context=get_context("spawn"), initializer=_worker_init
            )
            self._workers = workers
        return self._executor

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def __enter__(self) -> MaterializerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def materialize(
        self,
        provider: AssetProvider,
        candidates: Sequence[AssetCandidate],
        context: PreparationContext,
    ) -> Iterator[list[Outcome]]:
        """Chunks of outcomes, in the order of ``candidates``; every snapshot in a chunk is
        published and durable (files and cache entry) when the chunk is yielded."""
        workers = worker_count(len(candidates))
        if workers > 1 and not _sendable(provider):
            log.info("prepare.serial", reason="provider cannot be sent to a worker process")
            workers = 1
        if workers == 1 and len(candidates) < MIN_PARALLEL:
            for candidate in candidates:
                yield [materialize_outcome(provider, candidate, context)]
            return
        if workers == 1:
            # Many candidates but one process: the same batched durability, in-process.
            yield from _staged_in_process(provider, candidates, context)
            return
        fence = context.fence
        sent = replace(context, fence=_StagingTag(fence.tag) if fence is not None else None)
        log.info("prepare.parallel", workers=workers, candidates=len(candidates))
        # This process prepares too (_in_order), so it counts as one of the ``workers``:
        # one pool process fewer than that keeps the cores busy without oversubscribing them.
        executor = self._pool(workers - 1)
        futures = [executor.submit(_in_worker, (provider, c, sent)) for c in candidates]
        try:
            chunk: list[tuple[Outcome, list[str]]] = []
            for result in _in_order(futures, lambda i: _stage_here(provider, candidates[i],
                                                                   context)):
                chunk.append(result)
                if len(chunk) >= SYNC_CHUNK:
                    yield _publish_chunk(chunk, context)
                    chunk = []
            if chunk:
                yield _publish_chunk(chunk, context)
        finally:
            for future in futures:
                future.cancel()


def _stage_here(
    provider: AssetProvider, candidate: AssetCandidate, context: PreparationContext
) -> tuple[Outcome, list[str]]:
    staging: list[str] = []
    return materialize_outcome(provider, candidate, replace(context, staging=staging)), staging


def _in_order(
    futures: Sequence[Future], run_here: Callable[[int], tuple[Outcome, list[str]]]
) -> Iterator[tuple[Outcome, list[str]]]:
    """The futures' results in order, with this process as one more worker: while the
    result it needs next is still being computed (by a worker that is busy, or not even
    started: spawning and importing the mesh stack takes seconds), it takes the next job no
    worker has started (cancelling it in the pool) and runs it here. Which process computes
    a job changes nothing in its result."""
    stolen: dict[int, tuple[Outcome, list[str]]] = {}
    ahead = 0
    for index, future in enumerate(futures):
        ahead = max(ahead, index + 1)
        while index not in stolen and not future.done():
            if future.cancel():  # nobody started it: this process does it now
                stolen[index] = run_here(index)
                break
            while ahead < len(futures) and not futures[ahead].cancel():
                ahead += 1  # running or done in a worker
            if ahead >= len(futures):
                break  # nothing left to take: wait for the worker
            stolen[ahead] = run_here(ahead)
            ahead += 1
        yield stolen.pop(index) if index in stolen else future.result()


def _staged_in_process(
    provider: AssetProvider, candidates: Sequence[AssetCandidate], context: PreparationContext
) -> Iterator[list[Outcome]]:
    """Stage each snapshot here (no fsync per file) and publish them a chunk at a time,
    exactly as the pool's results are published."""
    chunk: list[tuple[Outcome, list[str]]] = []
    for candidate in candidates:
        staging: list[str] = []
        outcome = materialize_outcome(provider, candidate, replace(context, staging=staging))
        chunk.append((outcome, staging))
        if len(chunk) >= SYNC_CHUNK:
            yield _publish_chunk(chunk, context)
            chunk = []
    if chunk:
        yield _publish_chunk(chunk, context)


def _publish_chunk(
    chunk: list[tuple[Outcome, list[str]]], context: PreparationContext
) -> list[Outcome]:
    """The chunk's outcomes with every staged snapshot published (durably) by this process."""
    from runtime.assets.cache import publish_staged

    staged = [
        (outcome, folders[0]) for outcome, folders in chunk
        if folders and isinstance(outcome, PreparedAsset)
    ]
    published = iter(publish_staged(staged, context))
    outcomes: list[Outcome] = []
    for outcome, folders in chunk:
        if folders and isinstance(outcome, PreparedAsset):
            result = next(published)
            outcomes.append(
                result if isinstance(result, PreparedAsset)
                else (type(result).__name__, str(result))
            )
        else:
            outcomes.append(outcome)  # a reused snapshot (already published) or a failure
    return outcomes


def _sendable(value: Any) -> bool:
    """Whether a spawned worker can rebuild ``value``: it pickles, and its class lives in an
    importable module (a class defined in a script's ``__main__`` would make every worker
    re-run that script)."""
    if type(value).__module__ in ("__main__", "__mp_main__"):
        return False
    try:
        pickle.dumps(value)
    except Exception:  # noqa: BLE001 - any reason means: keep it in this process
        return False
    return True
