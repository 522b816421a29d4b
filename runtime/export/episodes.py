"""The one reader of committed episodes that every dataset format is built from.

A dataset is a projection of the log: only episodes with a `TrajectoryCommitted` receipt
count, in a fixed order (runs in the order given, then batch and episode index), and each
trajectory's bytes are checked against the receipt's size and SHA-256 before they are used.
Order and content depend on the log alone, never on when or by which session an episode was
collected, so a resumed run and an uninterrupted one give the same dataset content.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from domain.canonical import sha256_hex
from domain.errors import AssetcastInputError
from runtime.export.errors import NoAcceptedEpisodes, TaskMismatch, TrajectoryVerificationFailed
from runtime.export.trajectory_file import load_payload

_LOAD_THREADS = 2


@dataclass(frozen=True)
class Provenance:
    """Where an exported episode came from, traceable back to the log and the assets."""

    run_id: str
    batch_index: int
    episode_index: int
    asset_set_id: str
    assets: dict[str, dict[str, str]]  # role -> {asset_id, content_sha256}
    trajectory_sha256: str
    commit_seq: int
    camera_files: dict[str, str] = field(default_factory=dict)  # "<camera>.<modality>" -> sha

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "batch_index": self.batch_index,
            "episode_index": self.episode_index,
            "asset_set_id": self.asset_set_id,
            "assets": {role: dict(self.assets[role]) for role in sorted(self.assets)},
            "trajectory_sha256": self.trajectory_sha256,
            "commit_seq": self.commit_seq,
            "camera_files": {k: self.camera_files[k] for k in sorted(self.camera_files)},
        }


@dataclass(frozen=True)
class EpisodeData:
    """One trajectory's arrays (float64 as recorded, read-only: views of the verified bytes,
    shared by every version a live dataset builds from them) and its metadata; with cameras, their
    decoded frames (``cameras``: the cameras reader's ``EpisodeFrames``) and each camera's
    RGB video bytes as committed (``videos``), both checked against the commit receipt."""

    arrays: dict[str, np.ndarray]
    metadata: dict[str, Any]
    cameras: Any = None
    videos: dict[str, bytes] = field(default_factory=dict)

    @property
    def num_actions(self) -> int:
        return int(self.arrays["actions"].shape[0])


@dataclass(frozen=True)
class CommittedEpisode:
    """A committed episode as the log records it; ``load`` reads and verifies its file."""

    provenance: Provenance
    trajectory_path: Path
    trajectory_bytes: int
    deployment_path: Path
    output_dir: Path = Path(".")
    receipt: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def name(self) -> str:
        """How a refusal names this episode (e.g. the one whose columns differ)."""
        p = self.provenance
        return f"run {p.run_id} batch {p.batch_index} episode {p.episode_index}"

    def load(self) -> EpisodeData:
        """Read the trajectory once, check size and SHA-256 against the receipt, decode it
        (the very bytes that were hashed)."""
        p = self.provenance
        where = f"run {p.run_id}: trajectory {self.trajectory_path} (batch {p.batch_index}, "
        where += f"episode {p.episode_index})"
        try:
            data = self.trajectory_path.read_bytes()
        except OSError as error:
            raise TrajectoryVerificationFailed(f"{where} cannot be read: {error}") from None
        if len(data) != self.trajectory_bytes:
            raise TrajectoryVerificationFailed(
                f"{where} has {len(data)} bytes, the log recorded {self.trajectory_bytes}"
            )
        if sha256_hex(data) != p.trajectory_sha256:
            raise TrajectoryVerificationFailed(
                f"{where} has SHA-256 {sha256_hex(data)}, the log recorded {p.trajectory_sha256}"
            )
        payload = load_payload(data)
        metadata = json.loads(payload.pop("metadata"))
        arrays = {k: v for k, v in payload.items() if isinstance(v, np.ndarray)}
        files = list(self.receipt.get("files") or ())
        if not files:
            return EpisodeData(arrays=arrays, metadata=metadata)
        return EpisodeData(arrays, metadata, *self._camera_files(files))

    def _camera_files(self, files: list[dict[str, Any]]) -> tuple[Any, dict[str, bytes]]:
        """Decoded frames of every camera and the committed RGB videos, all verified."""
        from runtime.sim.cameras.reader import read_episode_frames

        try:
            frames = read_episode_frames(self.output_dir, self.receipt)
        except AssetcastInputError as error:
            raise TrajectoryVerificationFailed(
                f"run {self.provenance.run_id}: {error}"
            ) from None
        videos = {}
        for entry in files:
            if entry["modality"] != "rgb":
                continue
            path = _resolve(entry["path"], self.output_dir)
            data = path.read_bytes()
            if len(data) != int(entry["bytes"]) or sha256_hex(data) != entry["sha256"]:
                raise TrajectoryVerificationFailed(
                    f"run {self.provenance.run_id}: camera file {path} differs from its receipt"
                )
            videos[entry["camera"]] = data
        return frames, videos


def batch_ranges(episodes: Sequence[CommittedEpisode]) -> list[range]:
    """The runs of consecutive episodes of one batch (of one run), in order: the unit both
    writers build a version from (a LeRobot data file never holds two batches; a robomimic
    file is written one batch at a time), so a growing dataset reuses whole batches."""
    ranges: list[range] = []
    start = 0
    for i in range(1, len(episodes) + 1):
        if i == len(episodes) or _batch_key(episodes[i]) != _batch_key(episodes[i - 1]):
            ranges.append(range(start, i))
            start = i
    return ranges


def _batch_key(episode: CommittedEpisode) -> tuple[str, int]:
    return episode.provenance.run_id, episode.provenance.batch_index


@dataclass(frozen=True)
class RunSource:
    """What one run contributes: its committed episodes and the log version they were read at."""

    run_id: str
    task_id: str
    log_position: int
    episodes: tuple[CommittedEpisode, ...]


@dataclass(frozen=True)
class DatasetSource:
    """Every committed episode of the runs, in dataset order, with the task they share."""

    runs: tuple[RunSource, ...]
    task_id: str
    instruction: str
    episodes: tuple[CommittedEpisode, ...] = field(default=())
    cache: dict[tuple[str, str], EpisodeData] | None = field(default=None, compare=False)

    def load(self, episode: CommittedEpisode) -> EpisodeData:
        """``episode.load()``, remembered in ``cache`` when the source has one (a live
        dataset re-exports the same episodes after every batch; each is verified once)."""
        if self.cache is None:
            return episode.load()
        key = (str(episode.trajectory_path), episode.provenance.trajectory_sha256)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = episode.load()
        return found

    def load_many(self, episodes: Sequence[CommittedEpisode]) -> list[EpisodeData]:
        """:meth:`load` of each episode, in order, several at a time (reading and hashing a
        file release the GIL); the first episode (in order) that fails raises."""
        if len(episodes) < 2:
            return [self.load(e) for e in episodes]
        return [future.result() for future in self.loading(episodes)]

    def loading(self, episodes: Sequence[CommittedEpisode]) -> list[Future[EpisodeData]]:
        """:meth:`load` of each episode started on the load threads (in order, several at a
        time); each future gives that episode's data or its verification error."""
        from runtime.export.publish import worker_pool

        pool = worker_pool("load", _LOAD_THREADS)
        return [pool.submit(self.load, episode) for episode in episodes]

    @cached_property
    def first_deployment(self) -> Path:
        return self.episodes[0].deployment_path

    def provenance(self) -> list[dict[str, Any]]:
        return [e.provenance.to_dict() for e in self.episodes]

    def iter_loaded(self) -> Iterator[tuple[CommittedEpisode, EpisodeData]]:
        for episode in self.episodes:
            yield episode, self.load(episode)


def _resolve(recorded: str, output_dir: Path) -> Path:
    path = Path(recorded)
    return path if path.is_absolute() else output_dir / path


class RunFold:
    """A run's committed episodes, folded from its events as they arrive: a live dataset
    feeds each update only the events appended since the last one, so an update costs what
    is new, not the whole log (:func:`run_source` is the one-shot form)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._created: dict[str, Any] | None = None
        self._resolved: dict[int, dict[str, Any]] = {}
        self._deployments: dict[int, Path] = {}
        self._receipts: dict[tuple[int, int], tuple[int, dict[str, Any]]] = {}
        # Built once per receipt; a batch's episodes again when its batch facts change.
        self._episodes: dict[int, dict[int, CommittedEpisode]] = {}
        self._position = 0

    def add(self, events: Iterable[Any]) -> RunFold:
        for event in events:
            p = event.payload
            self._position = event.seq
            if event.type == "RunCreated" and self._created is None:
                self._created = p
            elif event.type == "BatchResolved":
                self._resolved[p["batch_index"]] = p
                self._episodes.pop(p["batch_index"], None)
            elif event.type == "DeploymentMaterialized":
                self._deployments[p["batch_index"]] = p["deployment_path"]
                self._episodes.pop(p["batch_index"], None)
            elif event.type == "TrajectoryCommitted":
                self._receipts[(p["batch_index"], p["episode_index"])] = (event.seq, p)
                self._episodes.get(p["batch_index"], {}).pop(p["episode_index"], None)
        return self

    def source(self) -> RunSource:
        """The committed episodes of the events added so far (a later receipt wins)."""
        if self._created is None:
            raise NoAcceptedEpisodes(f"run {self.run_id} has no RunCreated event")
        output_dir = Path(self._created["output_dir"])
        episodes = []
        for key in sorted(self._receipts):
            built = self._episodes.setdefault(key[0], {})
            episode = built.get(key[1])
            if episode is None:
                episode = built[key[1]] = self._episode(key, output_dir)
            episodes.append(episode)
        return RunSource(
            run_id=self.run_id,
            task_id=self._created["task_id"],
            log_position=self._position,
            episodes=tuple(episodes),
        )

    def _episode(self, key: tuple[int, int], output_dir: Path) -> CommittedEpisode:
        batch_index, episode_index = key
        seq, receipt = self._receipts[key]
        batch = self._resolved[batch_index]
        assets = {
            role: {"asset_id": a["asset_id"], "content_sha256": a["content_sha256"]}
            for role, a in batch["assets"].items()
        }
        return CommittedEpisode(
            provenance=Provenance(
                run_id=self.run_id,
                batch_index=batch_index,
                episode_index=episode_index,
                asset_set_id=batch["asset_set_id"],
                assets=assets,
                trajectory_sha256=receipt["sha256"],
                commit_seq=seq,
                camera_files={
                    f"{f['camera']}.{f['modality']}": f["sha256"]
                    for f in receipt.get("files") or ()
                },
            ),
            trajectory_path=_resolve(receipt["path"], output_dir),
            trajectory_bytes=int(receipt["bytes"]),
            deployment_path=_resolve(self._deployments[batch_index], output_dir),
            output_dir=output_dir,
            receipt=dict(receipt),
        )


def run_source(run_id: str, events: Sequence[Any]) -> RunSource:
    """The committed episodes of one run's events (a later receipt for an episode wins)."""
    return RunFold(run_id).add(events).source()


@lru_cache(maxsize=256)
def deployment_task(deployment_path: Path) -> Any:
    """The deployment's task (a deployment never changes once materialized: its manifest
    digest is in the log), parsed once per process."""
    from runtime.taskfile import load_task

    return load_task(deployment_path / "task.yaml")


def task_instruction(deployment_path: Path) -> str:
    """The task string of the dataset: the deployment's task file instruction (or default)."""
    return deployment_task(deployment_path).instruction_text


def dataset_source(
    runs: Sequence[RunSource],
    *,
    allow_empty: bool = False,
    cache: dict[tuple[str, str], EpisodeData] | None = None,
) -> DatasetSource:
    """Merge runs of one task into one ordered episode list; refuse mixed tasks or no data."""
    if not runs:
        raise NoAcceptedEpisodes("no run given")
    first = runs[0]
    for other in runs[1:]:
        if other.task_id != first.task_id:
            raise TaskMismatch(
                f"runs {first.run_id} and {other.run_id} are of different tasks "
                f"({first.task_id!r} and {other.task_id!r}); a dataset holds one task"
            )
    seen: set[str] = set()
    for run in runs:
        if run.run_id in seen:
            raise TaskMismatch(f"run {run.run_id} is given twice")
        seen.add(run.run_id)
    episodes = tuple(e for run in runs for e in run.episodes)
    if not episodes:
        if not allow_empty:
            names = ", ".join(r.run_id for r in runs)
            raise NoAcceptedEpisodes(f"run(s) {names} have no committed accepted episode")
        return DatasetSource(runs=tuple(runs), task_id=first.task_id, instruction="")
    instructions = {
        task_instruction(run.episodes[0].deployment_path) for run in runs if run.episodes
    }
    if len(instructions) > 1:
        raise TaskMismatch(
            f"runs of task {first.task_id!r} carry different instructions: {sorted(instructions)}"
        )
    return DatasetSource(
        runs=tuple(runs), task_id=first.task_id, instruction=instructions.pop(), episodes=episodes,
        cache=cache,
    )


def read_source(store: Any, run_ids: Sequence[str]) -> DatasetSource:
    """The dataset source for ``run_ids`` as their logs stand now."""
    from domain.errors import UnknownRun

    runs = []
    for run_id in run_ids:
        events = store.read(run_id)
        if not events:
            raise UnknownRun(f"unknown run {run_id!r}")
        runs.append(run_source(run_id, events))
    return dataset_source(runs)
