"""Materializing many candidates at once: a process pool across cores, results in order.

Why processes: copying, hashing, mesh checks and convex decomposition are CPU-bound Python
and numpy, so threads would share one core. Why ``spawn``: a forked child of a process that
ever created a GL context hangs, and a spawned worker inherits nothing.

What stays exactly as in a serial preparation: the facts and their order. Results come back
in the order the candidates were logged, and the caller appends their events in that order,
so a run prepared with a pool logs the same events as one prepared serially.

What changes is durability's cost, never its guarantee: a worker writes a snapshot without
an fsync per file and makes it durable with one file-system sync before renaming it into the
cache; the caller syncs the cache folder once per chunk of results (making those renames
durable) before it logs any of them. Nothing is claimed in the log before it is on disk.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import structlog

from domain.assets import AssetCandidate, AssetProvider, PreparationContext, PreparedAsset
from runtime.syncfs import make_entries_durable

log = structlog.get_logger(__name__)

WORKERS_ENV = "ASSETCAST_PREPARE_WORKERS"
# Fewer candidates than this are prepared serially: starting spawned workers (each imports
# numpy, trimesh, scipy) costs more than it saves on a small catalog.
MIN_PARALLEL = 64
# Results logged per durability pass (one sync of the cache folder each).
SYNC_CHUNK = 64

# (error_type, detail) for a failed materialization, else the PreparedAsset.
Outcome = PreparedAsset | tuple[str, str]


def worker_count(candidates: int) -> int:
    """Workers for ``candidates`` pending materializations: ``$ASSETCAST_PREPARE_WORKERS``
    if set (1 = serial), else one per core; 1 when there are too few to be worth it."""
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
    (type name, message), which is all a rejection records."""
    from runtime.preparation.candidates import materialize_candidate

    try:
        return materialize_candidate(provider, candidate, context)
    except Exception as error:  # noqa: BLE001 - recorded as a rejection, as serially
        return type(error).__name__, str(error)


def _in_worker(job: tuple[AssetProvider, AssetCandidate, PreparationContext]) -> Outcome:
    return materialize_outcome(*job)


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
        *,
        on_result: Callable[[], None] = lambda: None,
    ) -> Iterator[list[Outcome]]:
        """Chunks of outcomes, in the order of ``candidates``; every snapshot in a chunk is
        durable (files and cache entry) when the chunk is yielded. ``on_result`` runs as
        each result arrives (the lease heartbeat)."""
        workers = worker_count(len(candidates))
        if workers > 1 and not _sendable(provider):
            log.info("prepare.serial", reason="provider cannot be sent to a worker process")
            workers = 1
        if workers == 1:
            for candidate in candidates:
                on_result()
                yield [materialize_outcome(provider, candidate, context)]
            return
        batched = replace(context, batched_sync=True)
        jobs = [(provider, candidate, batched) for candidate in candidates]
        chunk: list[Outcome] = []
        cache_dir = Path(context.cache_dir).absolute()
        log.info("prepare.parallel", workers=workers, candidates=len(candidates))
        for outcome in self._pool(workers).map(_in_worker, jobs, chunksize=2):
            on_result()
            chunk.append(outcome)
            if len(chunk) >= SYNC_CHUNK:
                yield _durable(cache_dir, chunk)
                chunk = []
        if chunk:
            yield _durable(cache_dir, chunk)


def _durable(cache_dir: Path, chunk: list[Outcome]) -> list[Outcome]:
    if cache_dir.is_dir():  # absent only if every materialization failed before creating it
        make_entries_durable(cache_dir)
    return chunk


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
