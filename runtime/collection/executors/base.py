"""The executor interface: how the driver gets a batch's episodes run somewhere.

An executor runs batches on workers, each worker holding ONE environment that it reuses
across the batches it is given. It never touches the store or the run's output directory:
for every batch it reports that the batch was opened (environment built or assets
replaced), then each episode's outcome with its files' bytes, then that the batch is done.
The driver, the run's single writer, turns those reports into files and events.

Variants (one module each): ``local`` (in this process, the embedded default; sequential
collection is simply one worker) and ``ray`` (many workers on a Ray cluster).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domain.task import CheckSpec
from runtime.collection.environment import EnvironmentFactory
from runtime.collection.episode import EpisodeRun


@dataclass(frozen=True)
class Where:
    """The step a failure came from, so `RunFailed` can name phase, batch and episode."""

    phase: str
    batch_index: int | None
    episode_index: int | None


@dataclass(frozen=True)
class WorkSettings:
    """What every batch of a session shares."""

    factory: EnvironmentFactory
    settle_steps: int
    record: bool
    initial_checks: tuple[CheckSpec, ...] | None  # None: the task's own
    final_checks: tuple[CheckSpec, ...] | None
    run_id: str = ""  # recorded in every trajectory's metadata
    keep_rejected: bool = False  # encode rejected recorded episodes' files too


@dataclass(frozen=True)
class BatchWork:
    """One batch to run: its deployment (checked against ``manifest_sha256`` before use),
    its seed and the episodes still to do (possibly none: the batch is only re-opened).

    ``package`` (a :class:`runtime.collection.deployment_transfer.DeploymentPackage`) carries
    the deployment by content to a worker that cannot read ``deployment_path``."""

    batch_index: int
    asset_set_id: str
    seed: int
    deployment_path: Path
    manifest_sha256: str
    episodes: tuple[int, ...]
    package: Any = None


@dataclass(frozen=True)
class BatchOpened:
    """A worker is ready to run the batch's episodes."""

    batch_index: int
    worker: str
    built: bool  # True: the worker's environment was built for this batch
    constructions: int
    roles_replaced: tuple[str, ...]
    entities_kept: tuple[str, ...]


@dataclass(frozen=True)
class EpisodeDone:
    worker: str
    run: EpisodeRun


@dataclass(frozen=True)
class BatchDone:
    """Every episode of the batch given to the worker was reported."""

    batch_index: int
    worker: str


Report = BatchOpened | EpisodeDone | BatchDone


class Executor(ABC):
    """Runs batches; reports arrive in an order that keeps each batch's own order
    (opened, its episodes in index order, done)."""

    @abstractmethod
    def run(self, batches: Sequence[BatchWork]) -> Iterator[Report]:
        """Run ``batches``; an error is raised with its identity from the iteration, and
        :attr:`where` then names the step it came from."""

    @abstractmethod
    def close(self) -> None:
        """Close every worker's environment once; the first close error is raised (the
        others become notes on it)."""

    @abstractmethod
    def shutdown(self) -> None:
        """Release whatever the executor holds besides environments (processes, a cluster
        connection); idempotent, called once the session is over, whatever happened."""

    @property
    @abstractmethod
    def built(self) -> bool:
        """Whether any worker holds an environment (so closing it is a fact to record)."""

    @property
    @abstractmethod
    def where(self) -> Where | None:
        """Where the last error raised by :meth:`run` happened (None: not a worker's)."""
