"""Building a dataset version from the log: one entry point for `export` and live updates.

``build_version`` reads nothing but the :class:`DatasetSource` it is given, writes the files
of the requested format into a private temporary place, and publishes them atomically
(:mod:`runtime.export.publish`). If the target already holds exactly these episodes in this
format, nothing is rewritten. The result names every file with its SHA-256; the caller records
it in each contributing run's log as `DatasetUpdated`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from domain.errors import AssetcastInputError
from runtime.export.episodes import DatasetSource
from runtime.export.errors import NotADataset
from runtime.export.hashes import dataset_digest, known_sha256, remember
from runtime.export.publish import BackgroundSync, DirectoryTarget, FileTarget, parent_lock
from runtime.export.sink import FileSink
from runtime.files import file_sha256

log = structlog.get_logger(__name__)

FORMATS = ("lerobot", "robomimic")
MANIFEST_SCHEMA = 1
WRITER_VERSION = 3  # bump when the bytes a given source produces change
SPLIT_SEED = 0


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset to keep: its format and where it lives."""

    format: str
    path: Path

    @classmethod
    def parse(cls, text: str, *, flag: str = "--dataset") -> DatasetSpec:
        """``lerobot:DIR`` or ``robomimic:FILE``."""
        fmt, sep, path = text.partition(":")
        if not sep or fmt not in FORMATS or not path:
            raise AssetcastInputError(
                f"{flag}: expected lerobot:DIR or robomimic:FILE, got {text!r}"
            )
        return cls(fmt, Path(os.path.abspath(path)))

    def target(self) -> DirectoryTarget | FileTarget:
        return DirectoryTarget(self.path) if self.format == "lerobot" else FileTarget(self.path)


@dataclass(frozen=True)
class DatasetVersion:
    """A published dataset: every file (relative path -> SHA-256) and what it holds."""

    spec: DatasetSpec
    digest: str
    files: dict[str, str]
    manifest: dict[str, Any]
    total_episodes: int
    total_frames: int
    written: bool

    def event_payload(self, run_id: str, log_position: int) -> dict[str, Any]:
        """`DatasetUpdated` for one contributing run (its episodes, its log position)."""
        return {
            "format": self.spec.format,
            "path": str(self.spec.path),
            "digest": self.digest,
            "files": dict(self.files),
            "episodes": [
                {k: e[k] for k in ("batch_index", "episode_index", "trajectory_sha256")}
                for e in self.manifest["episodes"]
                if e["run_id"] == run_id
            ],
            "total_episodes": self.total_episodes,
            "total_frames": self.total_frames,
            "log_position": log_position,
        }


def manifest_of(source: DatasetSource, fmt: str) -> dict[str, Any]:
    """What a version projects; equal manifests mean equal files (same writer version)."""
    return {
        "schema_version": MANIFEST_SCHEMA,
        "writer_version": WRITER_VERSION,
        "format": fmt,
        "task_id": source.task_id,
        "instruction": source.instruction,
        "runs": [run.run_id for run in source.runs],
        "episodes": source.provenance(),
    }


def read_manifest(spec: DatasetSpec) -> dict[str, Any] | None:
    """The manifest of the dataset at ``spec.path``; None if nothing is there; NotADataset
    if something else is (or a dataset of the other format)."""
    if spec.format == "lerobot":
        current = DirectoryTarget(spec.path).current()
        if current is None:
            return None
        try:
            manifest = _published_manifest(current / "meta" / "assetcast.json")
        except (OSError, ValueError):
            raise NotADataset(f"{spec.path} has no readable meta/assetcast.json") from None
    else:
        if not spec.path.exists() and not spec.path.is_symlink():
            return None
        manifest = _hdf5_manifest(spec.path)
    if not isinstance(manifest, dict) or manifest.get("format") != spec.format:
        raise NotADataset(f"{spec.path} is not an assetcast {spec.format} dataset")
    return manifest


_PUBLISHED: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}


def _file_identity(path: Path) -> tuple[int, int, int]:
    status = os.stat(path)
    return (status.st_ino, status.st_size, status.st_mtime_ns)


def _published_manifest(path: Path) -> Any:
    """A LeRobot version's manifest: the one this process published there (a live dataset
    reads it before every update, and parsing it is O(episodes)) while the file is unchanged,
    else parsed from the file."""
    found = _PUBLISHED.get(str(path))
    if found is not None and found[0] == _file_identity(path):
        return found[1]
    return json.loads(path.read_text())


def _remember_manifest(path: Path, manifest: dict[str, Any]) -> None:
    _PUBLISHED.clear()  # only the latest version is read again
    _PUBLISHED[str(path)] = (_file_identity(path), manifest)


def _hdf5_manifest(path: Path) -> Any:
    from runtime.export.robomimic import read_manifest as read_robomimic_manifest

    return read_robomimic_manifest(path)


def check_target(spec: DatasetSpec) -> None:
    """Refuse a path that holds something not ours, before anything is read or written."""
    spec.target().check_parent()
    read_manifest(spec)


def current_files(spec: DatasetSpec, *, memo: bool = True) -> dict[str, str]:
    """Every file of the dataset as it is on disk now (relative path -> SHA-256); ``memo``:
    files this process wrote or hashed, still with their inode, size and mtime, are not
    hashed again (checks of untrusted files pass False)."""
    digest_of = known_sha256 if memo else file_sha256
    if spec.format == "robomimic":
        return {spec.path.name: digest_of(spec.path)} if spec.path.is_file() else {}
    current = DirectoryTarget(spec.path).current()
    if current is None:
        return {}
    found = {}
    for path in sorted(current.rglob("*")):
        if path.is_file() or path.is_symlink():
            found[path.relative_to(current).as_posix()] = digest_of(path)
    return found


def _robot_type(source: DatasetSource) -> str | None:
    from runtime.export.episodes import deployment_task

    return deployment_task(source.first_deployment).scene.robot.kind


def build_version(
    spec: DatasetSpec,
    source: DatasetSource,
    *,
    scene_model: Callable[[Path], Any] | None = None,
    before_publish: Callable[[], None] = lambda: None,
    recorded: str | None = None,
) -> DatasetVersion:
    """Write (if needed) and publish the dataset ``source`` projects, at ``spec``.

    ``before_publish`` runs right before the switch (the caller's lease check: a session that
    lost its run publishes nothing). ``recorded``: the digest the log's latest
    `DatasetUpdated` gives this path; a robomimic file on disk with exactly that digest was
    published from the log, so a new version extends it (copies its batches, writes the new
    ones) even in a process that did not write it, e.g. the first update after a resume."""
    manifest = manifest_of(source, spec.format)
    with parent_lock(spec.path):
        existing = read_manifest(spec)
        if existing == manifest:
            files = current_files(spec)
            totals = existing_totals(spec)
            written = False
        else:
            if existing is not None and recorded is not None and spec.format == "robomimic":
                _adopt_recorded_file(spec, existing, recorded)
            files, totals = _write(spec, source, manifest, scene_model, before_publish, existing)
            written = True
    version = DatasetVersion(
        spec=spec,
        digest=dataset_digest(files),
        files=files,
        manifest=manifest,
        total_episodes=totals[0],
        total_frames=totals[1],
        written=written,
    )
    log.info(
        "dataset_published" if written else "dataset_unchanged",
        format=spec.format,
        path=str(spec.path),
        episodes=version.total_episodes,
        frames=version.total_frames,
        digest=version.digest,
    )
    return version


def _adopt_recorded_file(spec: DatasetSpec, manifest: dict[str, Any], recorded: str) -> None:
    """Let :func:`write_robomimic` extend the file at ``spec.path`` when its bytes are the
    version the log recorded (hashed here, never assumed); otherwise nothing changes and the
    new version is written whole, so a file changed since it was published is not carried
    forward."""
    from runtime.export.robomimic import is_published, remember_published

    if is_published(spec.path):
        return
    digest = file_sha256(spec.path)
    if dataset_digest({spec.path.name: digest}) != recorded:
        log.warning("dataset_file_not_as_recorded", path=str(spec.path),
                    detail="written whole: its bytes are not the version the log recorded")
        return
    remember_published(spec.path, manifest)
    remember(spec.path, digest)


def existing_totals(spec: DatasetSpec) -> tuple[int, int]:
    """(episodes, frames) of the dataset on disk, from its own metadata."""
    if spec.format == "lerobot":
        current = DirectoryTarget(spec.path).current()
        assert current is not None
        info = json.loads((current / "meta" / "info.json").read_text())
        return int(info["total_episodes"]), int(info["total_frames"])
    import h5py

    with h5py.File(spec.path, "r") as handle:
        group = handle["data"]
        return len(group), int(group.attrs["total"])


def render(
    fmt: str,
    source: DatasetSource,
    manifest: dict[str, Any],
    root: Path,
    *,
    file_name: str,
    scene_model: Callable[[Path], Any] | None = None,
    previous: Path | None = None,
    previous_manifest: dict[str, Any] | None = None,
) -> tuple[dict[str, str], tuple[int, int]]:
    """Write the dataset's files under ``root`` (a LeRobot tree, or ``root/file_name`` for
    robomimic); return every file's SHA-256 and (episodes, frames). Publishes nothing.

    ``previous`` (a LeRobot version folder, with its manifest; or the published robomimic
    file): what it shares with the new version is reused instead of written again; the bytes
    are the same either way."""
    if fmt == "lerobot":
        files, totals, _linked = render_lerobot(
            source, manifest, root, previous=previous, previous_manifest=previous_manifest
        )
        return files, totals
    from runtime.export.robomimic import write_robomimic
    from runtime.export.scene_model import deployment_model

    path = root / file_name
    totals = write_robomimic(
        source, path, manifest=manifest, split_seed=SPLIT_SEED,
        scene_model=scene_model or deployment_model, previous=previous,
    )
    return {file_name: file_sha256(path)}, (totals["total_episodes"], totals["total_frames"])


def render_lerobot(
    source: DatasetSource,
    manifest: dict[str, Any],
    root: Path,
    *,
    previous: Path | None = None,
    previous_manifest: dict[str, Any] | None = None,
    on_written: Callable[[Path], None] | None = None,
) -> tuple[dict[str, str], tuple[int, int], frozenset[str]]:
    """:func:`render` for LeRobot, also naming the files taken over from ``previous``
    (``on_written`` sees every file this call writes, once it is closed)."""
    from runtime.export.lerobot import PreviousVersion, write_lerobot

    sink = FileSink(root, on_written=on_written)
    reusable = (
        PreviousVersion.read(previous, previous_manifest)
        if previous is not None and previous_manifest is not None else None
    )
    totals = write_lerobot(
        source, sink, robot_type=_robot_type(source), previous=reusable, manifest=manifest
    )
    return (
        sink.sorted_files(),
        (totals["total_episodes"], totals["total_frames"]),
        frozenset(sink.linked),
    )


def _write(
    spec: DatasetSpec,
    source: DatasetSource,
    manifest: dict[str, Any],
    scene_model: Callable[[Path], Any] | None,
    before_publish: Callable[[], None],
    existing: dict[str, Any] | None,
) -> tuple[dict[str, str], tuple[int, int]]:
    if spec.format == "lerobot":
        target = DirectoryTarget(spec.path)
        previous = target.current() if existing is not None else None
        temporary = target.new_version()
        background = BackgroundSync(temporary)
        try:
            files, totals, linked = render_lerobot(
                source, manifest, temporary, previous=previous, previous_manifest=existing,
                on_written=background.written,
            )
            before_publish()
            final = target.publish(
                temporary, dataset_digest(files), skip=linked | frozenset(background.synced),
                written=background,
            )
        except BaseException:
            background.wait_quietly()
            target.discard(temporary)
            raise
        for relpath, digest in files.items():
            remember(final / relpath, digest)
        _remember_manifest(final / "meta" / "assetcast.json", manifest)
        return files, totals
    file_target = FileTarget(spec.path)
    temporary = file_target.new_file()
    try:
        files, totals = render(
            "robomimic", source, manifest, temporary.parent, file_name=temporary.name,
            scene_model=scene_model, previous=spec.path if existing is not None else None,
        )
        files = {spec.path.name: files[temporary.name]}
        before_publish()
        file_target.publish(temporary)
    except BaseException:
        file_target.discard(temporary)
        raise
    from runtime.export.robomimic import remember_published

    remember_published(spec.path, manifest)
    remember(spec.path, files[spec.path.name])
    return files, totals
