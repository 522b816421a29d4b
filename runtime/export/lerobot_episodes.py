"""``meta/episodes`` of a LeRobot dataset: one row per episode, built column by column.

Why columns: the table holds ten stats columns per feature (min/max/mean/std/count and five
quantiles, each a list per episode). They are built straight from the ``[episodes, width]``
stats matrices (offsets + values), never from per-episode Python lists, and the same
matrices feed ``meta/stats.json``. The other columns (indices, tasks, videos, provenance)
come from small per-episode row dicts. A growing dataset extends the previous version's
table and matrices by its new rows: the latest table this process wrote is remembered by
its file's SHA-256; otherwise the table is read from the file and its matrices derived from
its columns. Either way the same values give the same table, so the file's bytes do not
depend on how the version was built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from runtime.export.hashes import dataset_digest, known_sha256
from runtime.export.publish import version_folder
from runtime.export.sink import FileSink
from runtime.export.stats import STAT_KEYS

log = structlog.get_logger(__name__)

EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
EPISODES_FILE = EPISODES_PATH.format(chunk_index=0, file_index=0)
STATS_AFTER = "meta/episodes/file_index"  # the feature stats columns follow this one


def stat_column(key: str, stat: str) -> str:
    return f"stats/{key}/{stat}"


def _python_column(key: str, column: list[Any]) -> pa.Array:
    sample = column[0]
    if key == "tasks":
        return pa.array(column, type=pa.list_(pa.string()))
    if isinstance(sample, list):
        return pa.array(column, type=pa.list_(pa.int64() if key.endswith("/count")
                                              else pa.float64()))
    if isinstance(sample, str):
        return pa.array(column, type=pa.string())
    if isinstance(sample, float):
        return pa.array(column, type=pa.float64())
    return pa.array(column, type=pa.int64())


def _stat_columns(
    keys: Sequence[str], widths: Sequence[int], matrices: dict[str, np.ndarray]
) -> list[tuple[str, pa.Array]]:
    """Each feature's stats as list columns: ``count`` one frame count per episode, the
    others that feature's slice of the stat matrix."""
    episodes = len(matrices["count"])
    single = pa.array(np.arange(episodes + 1, dtype=np.int32))
    counts = pa.ListArray.from_arrays(single, pa.array(matrices["count"].astype(np.int64)))
    out = []
    low = 0
    for key, width in zip(keys, widths, strict=True):
        offsets = pa.array(np.arange(0, episodes * width + 1, width, dtype=np.int32))
        for stat in STAT_KEYS:
            if stat == "count":
                out.append((stat_column(key, stat), counts))
                continue
            flat = np.ascontiguousarray(matrices[stat][:, low : low + width]).reshape(-1)
            out.append((stat_column(key, stat), pa.ListArray.from_arrays(offsets, pa.array(flat))))
        low += width
    return out


def build_table(
    rows: list[dict[str, Any]], keys: Sequence[str], widths: Sequence[int],
    matrices: dict[str, np.ndarray],
) -> pa.Table:
    """The table of ``rows`` (every column but the feature stats, in file order) with the
    feature stats of ``matrices`` (one row per row) after ``STATS_AFTER``."""
    arrays, names = [], []
    for key in rows[0]:
        arrays.append(_python_column(key, [row[key] for row in rows]))
        names.append(key)
        if key == STATS_AFTER:
            for name, array in _stat_columns(keys, widths, matrices):
                arrays.append(array)
                names.append(name)
    return pa.Table.from_arrays(arrays, names=names)


@dataclass
class EpisodesTable:
    """A version's ``meta/episodes`` table and, per feature set, its stats matrices
    (``stat -> [episodes, sum of widths]``, ``count``: ``[episodes]``)."""

    table: pa.Table
    _matrices: dict[tuple[str, ...], dict[str, np.ndarray]] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    def column(self, name: str) -> list[Any]:
        return self.table.column(name).to_pylist()

    def matrices(self, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
        found = self._matrices.get(keys)
        if found is None:
            found = self._matrices[keys] = _matrices_of(self.table, keys)
        return found


def _flat(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).combine_chunks().flatten().to_numpy(zero_copy_only=False)


def _matrices_of(table: pa.Table, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    rows = table.num_rows
    out = {"count": _flat(table, stat_column(keys[0], "count")).astype(np.float64)}
    for stat in STAT_KEYS:
        if stat != "count":
            out[stat] = np.concatenate(
                [_flat(table, stat_column(key, stat)).reshape(rows, -1) for key in keys], axis=1
            ).astype(np.float64)
    return out


def extended_table(
    previous: EpisodesTable | None, reused: int, rows: list[dict[str, Any]],
    keys: tuple[str, ...], widths: Sequence[int], fresh: dict[str, np.ndarray],
) -> EpisodesTable:
    """The table of the previous version's first ``reused`` episodes followed by ``rows``
    (their feature stats in ``fresh``)."""
    if previous is None or reused == 0:
        return EpisodesTable(build_table(rows, keys, widths, fresh), {keys: fresh})
    old = previous.matrices(keys)
    matrices = {stat: np.concatenate([old[stat][:reused], fresh[stat]]) for stat in old}
    head = previous.table.slice(0, reused)
    if rows:
        tail = build_table(rows, keys, widths, fresh)
        try:
            table = pa.concat_tables([head.cast(tail.schema), tail]).combine_chunks()
            return EpisodesTable(table, {keys: matrices})
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
            pass  # a column typed differently: build it whole
    stats = {stat_column(key, stat) for key in keys for stat in STAT_KEYS}
    old_rows = head.select([n for n in head.column_names if n not in stats]).to_pylist()
    table = build_table(old_rows + rows, keys, widths, matrices)
    return EpisodesTable(table, {keys: matrices})


_LATEST: dict[str, EpisodesTable] = {}  # SHA-256 of a meta/episodes file -> what it holds


def remember(digest: str, episodes: EpisodesTable) -> None:
    _LATEST.clear()  # only the latest version is ever reused
    _LATEST[digest] = episodes


def _read(path: Path, digest: str | None) -> EpisodesTable | None:
    """The ``meta/episodes`` of a version: the one this process wrote or parsed last for this
    exact content, else parsed from the file."""
    if digest is None:
        return None
    if digest not in _LATEST:
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException):
            return None
        remember(digest, EpisodesTable(table.replace_schema_metadata(None)))
    return _LATEST[digest]


@dataclass(frozen=True)
class PreviousVersion:
    """The version a dataset holds now, as far as a new version can reuse it: its folder,
    manifest and ``meta/episodes`` (which carries each episode's exact stats)."""

    root: Path
    manifest: dict[str, Any]
    episodes: EpisodesTable
    files: dict[str, str]  # relative path -> SHA-256, as found

    @classmethod
    def read(cls, root: Path, manifest: dict[str, Any]) -> PreviousVersion | None:
        """The version in ``root``, or None (the new version is then written whole) when its
        files no longer hash to the digest it is named by: a file edited in place is never
        carried into a new version."""
        files = {
            path.relative_to(root).as_posix(): known_sha256(path)
            for path in sorted(root.rglob("*")) if path.is_file()
        }
        if version_folder(dataset_digest(files)) != root.name:
            log.warning("dataset_previous_version_altered", path=str(root))
            return None
        episodes = _read(root / EPISODES_FILE, files.get(EPISODES_FILE))
        return None if episodes is None else cls(root, manifest, episodes, files)

    def link_into(self, sink: FileSink, relpath: str) -> None:
        sink.link(relpath, self.root / relpath, digest=self.files[relpath])

    def reusable_prefix(self, manifest: dict[str, Any]) -> int:
        """How many leading episodes the new version shares with this one (0 when anything
        that shapes the files differs: writer, format, task, instruction)."""
        same = ("schema_version", "writer_version", "format", "task_id", "instruction")
        if any(self.manifest.get(key) != manifest.get(key) for key in same):
            return 0
        old, new = self.manifest.get("episodes") or [], manifest["episodes"]
        if len(old) != self.episodes.num_rows:
            return 0
        shared = 0
        for before, after in zip(old, new, strict=False):
            if before != after:
                break
            shared += 1
        return shared
