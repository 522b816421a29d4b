"""LeRobot v3.0 datasets, written with pyarrow (and PyAV for camera videos) only.

Layout (what ``lerobot.datasets.lerobot_dataset.LeRobotDataset`` 0.4.x reads)::

    meta/info.json                          codebase_version "v3.0", fps, features, totals, paths
    meta/stats.json                         per feature: min/max/mean/std/count/q01..q99
    meta/tasks.parquet                      task string (index) -> task_index
    meta/episodes/chunk-000/file-000.parquet  one row per episode (+ assetcast provenance)
    meta/assetcast.json                     the runs and episodes this version projects
    data/chunk-XXX/file-YYY.parquet         one row per frame

Frame ``i`` of an episode holds the observation before action ``i`` and that action, so an
episode of ``T`` actions has ``T`` frames; ``next.done`` marks its last one. Nothing in the
files depends on time or the host: the same episodes give the same bytes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from domain.canonical import sha256_json
from runtime.export.episodes import CommittedEpisode, DatasetSource, EpisodeData
from runtime.export.errors import TaskMismatch
from runtime.export.features import (
    Column,
    camera_layout,
    common_columns,
    control_fps,
    frame_rows,
    values,
)
from runtime.export.hashes import known_sha256
from runtime.export.sink import FileSink
from runtime.export.stats import (
    STAT_KEYS,
    aggregate_matrices,
    aggregate_stats,
    episode_stats,
    image_stats,
    stat_matrices,
)

log = structlog.get_logger(__name__)

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_FILES_SIZE_IN_MB = 100
VIDEO_FILES_SIZE_IN_MB = 200
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
MANIFEST_PATH = "meta/assetcast.json"
VIDEO_KEY = "observation.images.{camera}"
PROVENANCE_PREFIX = "assetcast/"
INDEX_FEATURES = ("timestamp", "frame_index", "episode_index", "index", "task_index")
# Fixed writer options: with the same pyarrow, the same table gives the same bytes.
_PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "snappy",
    "use_dictionary": False,
    "write_statistics": True,
    "version": "2.6",
    "data_page_version": "1.0",
}


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=max(table.num_rows, 1), **_PARQUET_OPTIONS)
    return sink.getvalue().to_pybytes()


def json_bytes(value: Any) -> bytes:
    return (json.dumps(value, indent=4, ensure_ascii=False, allow_nan=False) + "\n").encode()


_EPISODE_TEXT: dict[str, str] = {}  # an episode's compact JSON -> its indented manifest text
_EPISODE_TEXT_LIMIT = 100_000
_EPISODES_TAIL = '    "episodes": []\n}\n'


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """``json_bytes(manifest)``, byte for byte, without indenting every episode again: a
    live dataset rewrites the manifest after every batch and Python's indenting encoder is
    pure Python, so each episode's text (its JSON at the list's depth) is remembered."""
    episodes = manifest.get("episodes")
    head = json_bytes({**manifest, "episodes": []}).decode()
    if not episodes or not head.endswith(_EPISODES_TAIL):
        return json_bytes(manifest)
    if len(_EPISODE_TEXT) > _EPISODE_TEXT_LIMIT:
        _EPISODE_TEXT.clear()
    parts = []
    for episode in episodes:
        key = json.dumps(episode, ensure_ascii=False, allow_nan=False)
        text = _EPISODE_TEXT.get(key)
        if text is None:
            text = json.dumps(episode, indent=4, ensure_ascii=False, allow_nan=False)
            text = _EPISODE_TEXT[key] = text.replace("\n", "\n" + " " * 8)
        parts.append(text)
    body = ",\n        ".join(parts)
    return (head[: -len(_EPISODES_TAIL)] + '    "episodes": [\n        ' + body
            + "\n    ]\n}\n").encode()


def _vector_array(matrix: np.ndarray, dtype: pa.DataType) -> pa.Array:
    """``[rows, width]`` -> a fixed-size list column (HF ``Sequence(length=width)``); width 1
    -> a scalar column (LeRobot maps shape ``(1,)`` to a plain value)."""
    rows, width = matrix.shape
    flat = pa.array(np.ascontiguousarray(matrix).reshape(-1), type=dtype)
    if width == 1:
        return flat
    return pa.FixedSizeListArray.from_arrays(flat, width)


def _feature(dtype: str, width: int, names: Sequence[str] | None) -> dict[str, Any]:
    return {"dtype": dtype, "shape": [width], "names": list(names) if names is not None else None}


def episode_frames(
    columns: Sequence[Column], data: EpisodeData, episode_index: int, start: int, fps: int,
    stride: int = 1,
) -> dict[str, np.ndarray]:
    """Every feature of one episode's frames as ``[frames, width]`` arrays (every
    ``stride``-th control step when cameras record at a lower rate)."""
    frames = len(frame_rows(data, stride))
    taken = slice(0, data.num_actions, stride)  # the same rows as frame_rows, as a view
    block = {column.lerobot_key: values(column, data)[taken] for column in columns}
    frame_index = np.arange(frames, dtype=np.int64)
    done = frame_index == frames - 1
    block["next.reward"] = done.astype(np.float64)[:, None]
    block["next.done"] = done[:, None]
    block["timestamp"] = (frame_index / fps)[:, None]
    block["frame_index"] = frame_index[:, None]
    block["episode_index"] = np.full((frames, 1), episode_index, dtype=np.int64)
    block["index"] = (start + frame_index)[:, None]
    block["task_index"] = np.zeros((frames, 1), dtype=np.int64)
    return block


def features_of(columns: Sequence[Column]) -> dict[str, dict[str, Any]]:
    features: dict[str, dict[str, Any]] = {}
    for column in columns:
        feature = _feature("float32", column.width, column.names)
        if column.units is not None:
            feature["units"] = list(column.units)
        features[column.lerobot_key] = feature
    features["next.reward"] = _feature("float32", 1, None)
    features["next.done"] = _feature("bool", 1, None)
    features["timestamp"] = _feature("float32", 1, None)
    for key in INDEX_FEATURES[1:]:
        features[key] = _feature("int64", 1, None)
    return features


_ARROW_TYPES = {"float32": pa.float32(), "int64": pa.int64(), "bool": pa.bool_()}
_NUMPY_TYPES = {"float32": np.float32, "int64": np.int64, "bool": np.bool_}


def _frame_table(
    blocks: Sequence[dict[str, np.ndarray]], features: dict[str, dict[str, Any]]
) -> pa.Table:
    arrays, fields = [], []
    for key, feature in features.items():
        matrix = np.concatenate([b[key] for b in blocks], axis=0)
        matrix = matrix.astype(_NUMPY_TYPES[feature["dtype"]])
        arrays.append(_vector_array(matrix, _ARROW_TYPES[feature["dtype"]]))
        fields.append(pa.field(key, arrays[-1].type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


@functools.lru_cache(maxsize=16)
def _tasks_bytes(instruction: str) -> bytes:
    return _parquet_bytes(_tasks_table(instruction))


def _tasks_table(instruction: str) -> pa.Table:
    """``meta/tasks.parquet`` as pandas writes LeRobot's DataFrame (task strings as the
    index), so ``pd.read_parquet`` gives back that index without pandas being needed here."""
    pandas_meta = {
        "index_columns": ["__index_level_0__"],
        "column_indexes": [
            {"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
             "metadata": {"encoding": "UTF-8"}}
        ],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
             "numpy_type": "int64", "metadata": None},
            {"name": None, "field_name": "__index_level_0__", "pandas_type": "unicode",
             "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "assetcast", "version": "1"},
        "pandas_version": "2.0.0",
    }
    schema = pa.schema(
        [pa.field("task_index", pa.int64()), pa.field("__index_level_0__", pa.string())],
        metadata={"pandas": json.dumps(pandas_meta, sort_keys=True)},
    )
    return pa.Table.from_arrays(
        [pa.array([0], type=pa.int64()), pa.array([instruction], type=pa.string())], schema=schema
    )


def _episode_name(episode: CommittedEpisode) -> str:
    p = episode.provenance
    return f"run {p.run_id} batch {p.batch_index} episode {p.episode_index}"


@dataclass(frozen=True)
class PreviousVersion:
    """The version a dataset holds now, as far as a new version can reuse it: its folder,
    manifest and ``meta/episodes`` rows (which carry each episode's exact stats)."""

    root: Path
    manifest: dict[str, Any]
    rows: list[dict[str, Any]]
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
        if sha256_json(files)[:32] != root.name:
            log.warning("dataset_previous_version_altered", path=str(root))
            return None
        episodes = EPISODES_PATH.format(chunk_index=0, file_index=0)
        rows = _episode_rows(root / episodes, files.get(episodes))
        return None if rows is None else cls(root, manifest, rows, files)

    def link_into(self, sink: FileSink, relpath: str) -> None:
        sink.link(relpath, self.root / relpath, digest=self.files[relpath])

    def reusable_prefix(self, manifest: dict[str, Any]) -> int:
        """How many leading episodes the new version shares with this one (0 when anything
        that shapes the files differs: writer, format, task, instruction)."""
        same = ("schema_version", "writer_version", "format", "task_id", "instruction")
        if any(self.manifest.get(key) != manifest.get(key) for key in same):
            return 0
        old, new = self.manifest.get("episodes") or [], manifest["episodes"]
        if len(old) != len(self.rows):
            return 0
        shared = 0
        for before, after in zip(old, new, strict=False):
            if before != after:
                break
            shared += 1
        return shared


@dataclass
class _EpisodesMemo:
    """The latest ``meta/episodes`` this process wrote or parsed: its rows and, once written
    here, the Arrow table and the vector stats matrices built from them, which the next
    version extends by its new rows instead of building them again from every row."""

    rows: list[dict[str, Any]]
    table: pa.Table | None = None
    stats_keys: tuple[str, ...] = ()
    matrices: dict[str, np.ndarray] | None = None


_ROWS: dict[str, _EpisodesMemo] = {}  # SHA-256 of a meta/episodes file -> what it holds


def _remember_rows(digest: str, memo: _EpisodesMemo) -> None:
    _ROWS.clear()  # only the latest version is ever reused
    _ROWS[digest] = memo


def _episode_rows(path: Path, digest: str | None) -> list[dict[str, Any]] | None:
    """``meta/episodes`` rows of a version: the ones this process wrote or parsed last for
    this exact content, else parsed from the file."""
    if digest is None:
        return None
    if digest not in _ROWS:
        try:
            rows = pq.read_table(path).to_pylist()
        except (OSError, pa.ArrowException):
            return None
        _remember_rows(digest, _EpisodesMemo(rows))
    return _ROWS[digest].rows


def _previous_memo(previous: PreviousVersion | None) -> _EpisodesMemo | None:
    if previous is None:
        return None
    return _ROWS.get(previous.files.get(EPISODES_PATH.format(chunk_index=0, file_index=0), ""))


def _extended_table(
    memo: _EpisodesMemo | None, rows: list[dict[str, Any]], reused: int
) -> pa.Table:
    """``_episodes_table(rows)``, from the previous table's first ``reused`` rows and the new
    ones when that table is at hand and the new rows have its columns (the same values
    give the same table, so the file's bytes do not depend on which way it was built)."""
    if memo is None or memo.table is None or not 0 < reused < len(rows):
        return _episodes_table(rows)
    try:
        table = pa.concat_tables([memo.table.slice(0, reused), _episodes_table(rows[reused:])])
    except pa.ArrowInvalid:  # a column typed differently: build it whole
        return _episodes_table(rows)
    return table.combine_chunks()


def _extended_stats(
    memo: _EpisodesMemo | None, rows: list[dict[str, Any]], reused: int, keys: tuple[str, ...]
) -> dict[str, np.ndarray]:
    """:func:`stat_matrices` of every row, reusing the previous version's first ``reused``."""
    def column(row: dict[str, Any], key: str, stat: str) -> Any:
        return row[f"stats/{key}/{stat}"]

    if (memo is None or memo.matrices is None or memo.stats_keys != keys
            or not 0 < reused < len(rows)):
        return stat_matrices(rows, keys, column)
    fresh = stat_matrices(rows[reused:], keys, column)
    return {
        stat: np.concatenate([memo.matrices[stat][:reused], fresh[stat]])
        for stat in fresh
    }


def data_groups(
    keys: Sequence[tuple[str, int]], lengths: Sequence[int], row_bytes: int
) -> list[list[int]]:
    """Episodes per data file: one file per batch (the unit a collector finishes, so a growing
    dataset adds files instead of rewriting them), split where it would pass
    ``DATA_FILES_SIZE_IN_MB``; an episode never spans two files."""
    limit = DATA_FILES_SIZE_IN_MB * 1024 * 1024
    groups: list[list[int]] = []
    size = 0
    for i, (key, length) in enumerate(zip(keys, lengths, strict=True)):
        estimate = length * row_bytes
        if not groups or key != keys[groups[-1][-1]] or size + estimate > limit:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += estimate
    return groups


def write_lerobot(
    source: DatasetSource,
    sink: FileSink,
    *,
    robot_type: str | None,
    previous: PreviousVersion | None = None,
    manifest: dict[str, Any] | None = None,
) -> dict:
    """Write every file of the dataset for ``source`` into ``sink``; return its totals.

    With ``previous`` (the version on disk) and the new ``manifest``, the episodes both share
    at the start are not read again: their ``meta/episodes`` rows are taken over and their
    data files (whole batches) and videos hard-linked. The bytes are the same as writing
    everything: every reused piece is a function of that shared prefix alone. ``manifest``
    (when given) is written as ``meta/assetcast.json``."""
    episodes = source.episodes
    reused = previous.reusable_prefix(manifest) if previous and manifest else 0
    loaded: dict[int, EpisodeData] = {}

    def data(i: int) -> EpisodeData:
        if i not in loaded:
            loaded[i] = source.load(episodes[i])
        return loaded[i]

    fresh = range(reused, len(episodes))
    wanted = sorted({0, *fresh})
    loaded.update(zip(wanted, source.load_many([episodes[i] for i in wanted]), strict=True))
    # The first episode fixes the layout, as in a whole export; new ones must share it.
    named = [(_episode_name(episodes[i]), data(i)) for i in sorted({0, *fresh})]
    # MuJoCo's full state is robomimic's `states`; a LeRobot policy sees observations only.
    columns = tuple(c for c in common_columns(named) if c.kind != "state")
    layout = camera_layout(named)
    rate = control_fps(named)
    if rate % layout.stride:
        raise TaskMismatch(f"cameras record every {layout.stride} steps of {rate} frames/s: "
                           "not a whole number of frames/s")
    fps = rate // layout.stride
    stride = layout.stride
    features = features_of(columns)
    videos = [cam for cam, (_h, _w, modalities) in layout.cameras.items() if "rgb" in modalities]
    old_rows = previous.rows if previous is not None else []
    lengths = [int(old_rows[i]["length"]) for i in range(reused)]
    lengths += [len(frame_rows(data(i), stride)) for i in fresh]
    row_bytes = sum((8 if f["dtype"] == "int64" else 4) * f["shape"][0] for f in features.values())
    batch_keys = [(e.provenance.run_id, e.provenance.batch_index) for e in episodes]
    groups = data_groups(batch_keys, lengths, row_bytes)
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64).tolist()

    blocks = {
        i: episode_frames(columns, data(i), i, starts[i], fps, stride) for i in fresh
    }
    old_files = {}
    for number, row in enumerate(old_rows):
        old_files.setdefault((row["data/chunk_index"], row["data/file_index"]), []).append(number)
    # Every folder exists before the first file is written: once files' syncs are in flight,
    # a mkdir waits for the journal commit they trigger.
    sink.make_folders(
        [DATA_PATH.format(chunk_index=n // CHUNKS_SIZE, file_index=n % CHUNKS_SIZE)
         for n in range(len(groups))]
        + [EPISODES_PATH.format(chunk_index=0, file_index=0), MANIFEST_PATH]
        + [_video_path(cam, i) for cam in videos for i in range(len(episodes))]
    )
    # Data files are encoded on worker threads (pyarrow releases the GIL) while this thread
    # computes the stats and metadata.
    encoding = []
    for file_number, group in enumerate(groups):
        chunk_index, file_index = divmod(file_number, CHUNKS_SIZE)
        path = DATA_PATH.format(chunk_index=chunk_index, file_index=file_index)
        if group[-1] < reused and old_files.get((chunk_index, file_index)) == group:
            assert previous is not None
            previous.link_into(sink, path)
            continue
        for i in group:
            if i not in blocks:
                blocks[i] = episode_frames(columns, data(i), i, starts[i], fps, stride)
        encoding.append(_encoders().submit(
            _write_data_file, sink, path, [blocks[i] for i in group], features
        ))
    episodes_file = EPISODES_PATH.format(chunk_index=0, file_index=0)
    rows: list[dict[str, Any]] = [dict(row) for row in old_rows[:reused]]
    try:
        fresh_stats = (
            episode_stats([blocks[i] for i in fresh], list(features)) if fresh else []
        )
        _episode_rows_into(rows, groups, reused, source, lengths, starts, videos, data, fps,
                           sink, fresh_stats, previous)
        # meta/episodes (one column per episode stat: the widest file) is encoded on a worker
        # while this thread aggregates the stats and writes the JSON files; its table is
        # built here, so the worker runs only code that releases the GIL.
        memo = _previous_memo(previous)
        table = _extended_table(memo, rows, reused)
        encoding.append(_encoders().submit(
            sink.write_with, episodes_file, _parquet_bytes, table
        ))
        keys = tuple(features)
        matrices = _extended_stats(memo, rows, reused, keys)
        _write_summaries(source, sink, rows, features, layout, videos, data, fps, starts,
                         robot_type, matrices)
        if manifest is not None:
            sink.write(MANIFEST_PATH, manifest_bytes(manifest))
    finally:
        wait(encoding)  # nothing may still write into the folder once this returns or raises
    for job in encoding:
        job.result()
    _remember_rows(sink.files[episodes_file], _EpisodesMemo(rows, table, keys, matrices))
    return {"total_episodes": len(episodes), "total_frames": starts[-1]}


def _episode_rows_into(
    rows: list[dict[str, Any]], groups: list[list[int]], reused: int, source: DatasetSource,
    lengths: list[int], starts: list[int], videos: list[str], data: Any, fps: int,
    sink: FileSink, fresh_stats: list[dict[str, Any]], previous: PreviousVersion | None,
) -> None:
    """Append the ``meta/episodes`` row of every fresh episode (writing its videos) and link
    the reused episodes' videos."""
    episodes = source.episodes
    for file_number, group in enumerate(groups):
        chunk_index, file_index = divmod(file_number, CHUNKS_SIZE)
        for i in group:
            if i < reused:
                continue
            rows.append(
                {
                    "episode_index": i,
                    "tasks": [source.instruction],
                    "length": lengths[i],
                    "data/chunk_index": chunk_index,
                    "data/file_index": file_index,
                    "dataset_from_index": starts[i],
                    "dataset_to_index": starts[i + 1],
                    **_episode_videos(videos, data(i), i, lengths[i], fps, sink),
                    "meta/episodes/chunk_index": 0,
                    "meta/episodes/file_index": 0,
                    **{
                        f"stats/{key}/{stat}": value
                        for key, stats in fresh_stats[i - reused].items()
                        for stat, value in stats.items()
                    },
                    **_provenance_columns(episodes[i]),
                }
            )
        for i in group:
            if i < reused:
                for cam in videos:
                    video = _video_path(cam, i)
                    previous.link_into(sink, video)  # type: ignore[union-attr]


def _write_summaries(
    source: DatasetSource, sink: FileSink, rows: list[dict[str, Any]],
    features: dict[str, Any], layout: Any, videos: list[str], data: Any, fps: int,
    starts: list[int], robot_type: str | None, matrices: dict[str, np.ndarray],
) -> None:
    """``meta/tasks.parquet``, ``meta/stats.json`` (aggregated from the episode rows' stat
    ``matrices``) and ``meta/info.json``."""
    episodes = source.episodes
    features = dict(features)  # the data files' encoders still read the caller's, unchanged
    sink.write("meta/tasks.parquet", _tasks_bytes(source.instruction))
    keys = tuple(features)
    widths = [len(rows[0][f"stats/{key}/min"]) for key in keys]
    stats = aggregate_matrices(matrices, keys, widths)
    for cam in videos:
        key = VIDEO_KEY.format(camera=cam)
        stats[key] = aggregate_stats(_row_stats(rows, key, image=True))
        features[key] = _video_feature(data(0).videos[cam], layout.cameras[cam], fps)
    sink.write("meta/stats.json", json_bytes(stats))
    total_frames = starts[-1]
    info = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": len(episodes),
        "total_frames": total_frames,
        "total_tasks": 1,
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": DATA_FILES_SIZE_IN_MB,
        "video_files_size_in_mb": VIDEO_FILES_SIZE_IN_MB,
        "fps": fps,
        "splits": {"train": f"0:{len(episodes)}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if videos else None,
        "features": features,
    }
    sink.write("meta/info.json", json_bytes(info))


def _encoders() -> ThreadPoolExecutor:
    from runtime.export.publish import worker_pool

    return worker_pool("parquet", 2)


def _write_data_file(
    sink: FileSink, path: str, blocks: list[dict[str, np.ndarray]], features: dict[str, Any]
) -> None:
    sink.write(path, _parquet_bytes(_frame_table(blocks, features)))


def _provenance_columns(episode: CommittedEpisode) -> dict[str, Any]:
    row = {}
    for key, value in episode.provenance.to_dict().items():
        if isinstance(value, dict):
            value = json.dumps(value, sort_keys=True, separators=(",", ":"))
        row[PROVENANCE_PREFIX + key] = value
    return row


def _row_stats(rows: Sequence[dict[str, Any]], key: str, *, image: bool = False) -> list[dict]:
    """One feature's per-episode stats as ``meta/episodes`` holds them (images: ``[C][1][1]``)."""
    parts = []
    for row in rows:
        part = {stat: row[f"stats/{key}/{stat}"] for stat in STAT_KEYS}
        if image:
            part = {s: v if s == "count" else np.reshape(v, (-1, 1, 1)) for s, v in part.items()}
        parts.append(part)
    return parts


def _video_path(camera: str, episode_index: int) -> str:
    chunk_index, file_index = divmod(episode_index, CHUNKS_SIZE)
    key = VIDEO_KEY.format(camera=camera)
    return VIDEO_PATH.format(video_key=key, chunk_index=chunk_index, file_index=file_index)


def _episode_videos(
    cameras: Sequence[str], data: EpisodeData, episode_index: int, frames: int, fps: int,
    sink: FileSink,
) -> dict[str, Any]:
    """Each camera's committed H.264 file, copied byte for byte as the episode's own video
    file (``from_timestamp`` 0), and the episode columns that point at it; per-episode image
    stats ride along with the other ``stats/`` columns."""
    row: dict[str, Any] = {}
    chunk_index, file_index = divmod(episode_index, CHUNKS_SIZE)
    for cam in cameras:
        key = VIDEO_KEY.format(camera=cam)
        sink.write(_video_path(cam, episode_index), data.videos[cam])
        row[f"videos/{key}/chunk_index"] = chunk_index
        row[f"videos/{key}/file_index"] = file_index
        row[f"videos/{key}/from_timestamp"] = 0.0
        row[f"videos/{key}/to_timestamp"] = frames / fps
        for stat, value in image_stats(data.cameras.cameras[cam].frames["rgb"][:frames]).items():
            row[f"stats/{key}/{stat}"] = np.asarray(value, dtype=np.float64).reshape(-1).tolist()
    return row


def _video_feature(video: bytes, camera: tuple[int, int, tuple[str, ...]], fps: int) -> dict:
    import io

    import av

    height, width, _modalities = camera
    with av.open(io.BytesIO(video)) as container:
        stream = container.streams.video[0]
        codec, pix_fmt = stream.codec_context.name, stream.codec_context.pix_fmt
    return {
        "dtype": "video",
        "shape": [height, width, 3],
        "names": ["height", "width", "channels"],
        "info": {
            "video.height": height,
            "video.width": width,
            "video.codec": codec,
            "video.pix_fmt": pix_fmt,
            "video.is_depth_map": False,
            "video.fps": fps,
            "video.channels": 3,
            "has_audio": False,
        },
    }


def _episodes_table(rows: list[dict[str, Any]]) -> pa.Table:
    arrays, fields = [], []
    for key in rows[0]:
        column = [row[key] for row in rows]
        sample = column[0]
        if key == "tasks":
            array = pa.array(column, type=pa.list_(pa.string()))
        elif isinstance(sample, list):
            array = pa.array(column, type=pa.list_(pa.int64() if key.endswith("/count")
                                                   else pa.float64()))
        elif isinstance(sample, str):
            array = pa.array(column, type=pa.string())
        elif isinstance(sample, float):
            array = pa.array(column, type=pa.float64())
        else:
            array = pa.array(column, type=pa.int64())
        arrays.append(array)
        fields.append(pa.field(key, array.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
