"""The in-process executor: one worker, one environment, batches one after the other.

This is the embedded default and the one-worker case of the general design: the driver
consumes the same reports it would get from many Ray workers. Reports are produced lazily,
so the driver makes an episode's files durable (and queues its events) before the next
episode starts, exactly as a sequential collector would.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from runtime.collection.executors.base import (
    BatchDone,
    BatchWork,
    EpisodeDone,
    Executor,
    Report,
    Where,
    WorkSettings,
)
from runtime.collection.executors.worker import BatchWorker


class LocalExecutor(Executor):
    def __init__(self, settings: WorkSettings) -> None:
        self.worker = BatchWorker(settings, name="local")

    def run(self, batches: Sequence[BatchWork]) -> Iterator[Report]:
        worker = self.worker
        for work in batches:
            yield worker.open(work)
            for episode_index in work.episodes:
                run = worker.episode(work.batch_index, episode_index)
                yield EpisodeDone(worker.name, run)
                if run.reset_error is not None:
                    return  # the driver logs the episode and fails the run with the error
            yield BatchDone(work.batch_index, worker.name)

    def close(self) -> None:
        self.worker.close()

    def shutdown(self) -> None:
        """Nothing beyond the environment lives here."""

    @property
    def built(self) -> bool:
        return self.worker.env is not None

    @property
    def where(self) -> Where | None:
        return self.worker.where
