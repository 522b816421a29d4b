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
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from runtime.export.episodes import CommittedEpisode, DatasetSource, EpisodeData, batch_ranges
from runtime.export.errors import TaskMismatch
from runtime.export.features import (
    camera_layout,
    common_columns,
    control_fps,
    frame_rows,
)
from runtime.export.json_text import json_bytes, manifest_bytes
from runtime.export.lerobot_episodes import (
    EPISODES_FILE,
    PreviousVersion,
    extended_table,
    remember,
    stat_column,
)
from runtime.export.lerobot_frames import (
    INDEX_FEATURES,
    features_of,
    frame_matrix,
    frame_table,
)
from runtime.export.sink import FileSink
from runtime.export.stats import (
    STAT_KEYS,
    aggregate_matrices,
    aggregate_stats,
    image_stats,
    segment_stats,
)

__all__ = [
    "INDEX_FEATURES", "PreviousVersion", "features_of", "json_bytes", "manifest_bytes",
    "write_lerobot",
]

log = structlog.get_logger(__name__)

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_FILES_SIZE_IN_MB = 100
VIDEO_FILES_SIZE_IN_MB = 200
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
MANIFEST_PATH = "meta/assetcast.json"
VIDEO_KEY = "observation.images.{camera}"
PROVENANCE_PREFIX = "assetcast/"
# Fixed writer options: with the same pyarrow, the same table gives the same bytes.
_PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "snappy",
    "use_dictionary": False,
    "write_statistics": True,
    "version": "2.6",
    "data_page_version": "1.0",
}


def _parquet_bytes(table: pa.Table) -> memoryview:
    """The file's bytes, as a view of Arrow's buffer (written and hashed without a copy)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=max(table.num_rows, 1), **_PARQUET_OPTIONS)
    return memoryview(sink.getvalue())


@functools.lru_cache(maxsize=16)
def _tasks_bytes(instruction: str) -> memoryview:
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
    fresh = range(reused, len(episodes))
    wanted = sorted({0, *fresh})
    # The folders every version has are made before the load threads start: a mkdir lets go
    # of the GIL, and taking it back from a busy load thread costs up to a switch interval.
    sink.make_folders([_data_path(0), EPISODES_FILE, MANIFEST_PATH])
    # Every wanted trajectory is read and verified on the load threads at once, in order;
    # this thread writes each batch's data file as soon as its episodes are in.
    loading = dict(zip(wanted, source.loading([episodes[i] for i in wanted]), strict=True))
    loaded: dict[int, EpisodeData] = {}

    def data(i: int) -> EpisodeData:
        if i not in loaded:
            future = loading.get(i)
            loaded[i] = future.result() if future is not None else source.load(episodes[i])
        return loaded[i]

    def layout_of(numbers: Sequence[int]) -> tuple[Any, ...]:
        named = [(episodes[i].name, data(i)) for i in numbers]
        # MuJoCo's full state is robomimic's `states`; a LeRobot policy sees observations.
        columns = tuple(c for c in common_columns(named) if c.kind != "state")
        layout = camera_layout(named)
        rate = control_fps(named)
        if rate % layout.stride:
            raise TaskMismatch(f"cameras record every {layout.stride} steps of {rate} "
                               "frames/s: not a whole number of frames/s")
        return columns, layout, rate

    encoding: list[Any] = []
    try:
        # The first episode fixes the layout, as in a whole export; new ones must share it
        # (checked batch by batch; on a difference, the check of all of them names it).
        first = layout_of([0])
        columns, layout, rate = first
        fps, stride = rate // layout.stride, layout.stride
        features = features_of(columns)
        videos = [c for c, (_h, _w, modalities) in layout.cameras.items() if "rgb" in modalities]
        old = previous.episodes if previous is not None else None
        old_lengths = [int(n) for n in old.column("length")[:reused]] if old is not None else []
        row_bytes = sum((8 if f["dtype"] == "int64" else 4) * f["shape"][0]
                        for f in features.values())
        # Every folder exists before the first file is written: once files' syncs are in
        # flight, a mkdir waits for the journal commit they trigger.
        sink.make_folders([_video_path(cam, i) for cam in videos for i in range(len(episodes))])
        old_files = _old_files(old)
        lengths: list[int] = []
        starts = [0]
        groups: list[list[int]] = []
        parts = []
        for batch in batch_ranges(episodes):
            new_ones = [i for i in batch if i >= reused]
            if new_ones and layout_of(new_ones) != first:
                layout_of([0, *new_ones])  # names the difference (TaskMismatch)
                raise TaskMismatch("episodes record different layouts")  # pragma: no cover
            for i in batch:
                lengths.append(old_lengths[i] if i < reused else len(frame_rows(data(i), stride)))
                starts.append(starts[-1] + lengths[-1])
            for local in data_groups([0] * len(batch), lengths[batch[0]:], row_bytes):
                group = [batch[0] + n for n in local]
                n = len(groups)
                groups.append(group)
                if group[-1] < reused and old_files.get(divmod(n, CHUNKS_SIZE)) == group:
                    previous.link_into(sink, _data_path(n))  # type: ignore[union-attr]
                    continue
                # One data file at a time: its frames as one matrix (the file's table is a
                # cast of it, its new episodes' stats are segment reductions over it), its
                # encoding on a worker thread (pyarrow releases the GIL) while this thread
                # goes on. The table is built here: a worker needing the GIL for numpy's
                # small steps would trade it with this thread, and every handover costs;
                # and one file's matrix at a time stays small (fresh pages of a big one cost
                # a page fault per 4 KiB).
                frames = frame_matrix(columns, features, [(i, data(i)) for i in group], starts,
                                      fps, stride)
                table_of_file = frame_table(frames, group, features)
                encoding.append(_encoders().submit(
                    sink.write_with, _data_path(n), _parquet_bytes, table_of_file
                ))
                new_here = [i for i in group if i >= reused]
                if new_here:
                    parts.append(segment_stats(frames.rows(new_here),
                                               [lengths[i] for i in new_here]))
        keys = tuple(features)
        widths = [feature["shape"][0] for feature in features.values()]
        fresh_stats = _joined(parts, sum(widths))
        rows = _episode_rows(groups, reused, source, lengths, starts, videos, data, fps, sink,
                             previous)
        table = extended_table(old, reused, rows, keys, widths, fresh_stats)
        # The widest file (ten stats columns per feature) and the last table ready: encoded
        # here at once, not queued behind the data files, and with no GIL handover between
        # its steps (a worker waits for this thread's switch interval at every one).
        sink.write(EPISODES_FILE, _parquet_bytes(table.table))
        _write_summaries(source, sink, table, features, layout, videos, data, fps, starts,
                         robot_type)
        if manifest is not None:
            sink.write(MANIFEST_PATH, manifest_bytes(manifest))
    except TaskMismatch:
        # The error a check of every wanted episode at once gives (after the first failing
        # trajectory's, if any fails): the same whichever batch showed the difference.
        layout_of(wanted)
        raise
    finally:
        for future in loading.values():
            future.cancel()
        wait(encoding)  # nothing may still write into the folder once this returns or raises
    for job in encoding:
        job.result()
    remember(sink.files[EPISODES_FILE], table)
    return {"total_episodes": len(episodes), "total_frames": starts[-1]}


def _old_files(old: Any) -> dict[tuple[int, int], list[int]]:
    """The previous version's data files: (chunk, file) -> the episodes it holds."""
    files: dict[tuple[int, int], list[int]] = {}
    if old is not None:
        places = zip(old.column("data/chunk_index"), old.column("data/file_index"), strict=True)
        for number, place in enumerate(places):
            files.setdefault(place, []).append(number)
    return files


def _joined(parts: list[dict[str, np.ndarray]], width: int) -> dict[str, np.ndarray]:
    """Per-file stats matrices of consecutive episodes, one after the other."""
    if not parts:
        out = {stat: np.empty((0, width)) for stat in STAT_KEYS if stat != "count"}
        out["count"] = np.empty(0, dtype=np.int64)
        return out
    if len(parts) == 1:
        return parts[0]
    return {stat: np.concatenate([part[stat] for part in parts]) for stat in STAT_KEYS}


def _data_path(file_number: int) -> str:
    chunk_index, file_index = divmod(file_number, CHUNKS_SIZE)
    return DATA_PATH.format(chunk_index=chunk_index, file_index=file_index)


def _episode_rows(
    groups: list[list[int]], reused: int, source: DatasetSource, lengths: list[int],
    starts: list[int], videos: list[str], data: Any, fps: int, sink: FileSink,
    previous: PreviousVersion | None,
) -> list[dict[str, Any]]:
    """The ``meta/episodes`` row of every fresh episode but its feature stats (writing its
    videos), and the reused episodes' videos linked."""
    episodes = source.episodes
    rows = []
    for file_number, group in enumerate(groups):
        chunk_index, file_index = divmod(file_number, CHUNKS_SIZE)
        for i in group:
            if i < reused:
                for cam in videos:
                    previous.link_into(sink, _video_path(cam, i))  # type: ignore[union-attr]
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
                    **_provenance_columns(episodes[i]),
                }
            )
    return rows


def _write_summaries(
    source: DatasetSource, sink: FileSink, table: Any,
    features: dict[str, Any], layout: Any, videos: list[str], data: Any, fps: int,
    starts: list[int], robot_type: str | None,
) -> None:
    """``meta/tasks.parquet``, ``meta/stats.json`` (aggregated from the ``meta/episodes``
    stats) and ``meta/info.json``."""
    episodes = source.episodes
    features = dict(features)  # the data files' encoders still read the caller's, unchanged
    sink.write("meta/tasks.parquet", _tasks_bytes(source.instruction))
    keys = tuple(features)
    widths = [feature["shape"][0] for feature in features.values()]
    stats = aggregate_matrices(table.matrices(keys), keys, widths)
    for cam in videos:
        key = VIDEO_KEY.format(camera=cam)
        stats[key] = aggregate_stats(_image_parts(table, key))
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



def _image_parts(table: Any, key: str) -> list[dict[str, Any]]:
    """One camera's per-episode stats as ``meta/episodes`` holds them, shaped ``[C][1][1]``."""
    columns = {stat: table.column(stat_column(key, stat)) for stat in STAT_KEYS}
    return [
        {stat: value[number] if stat == "count" else np.reshape(value[number], (-1, 1, 1))
         for stat, value in columns.items()}
        for number in range(table.num_rows)
    ]


def _provenance_columns(episode: CommittedEpisode) -> dict[str, Any]:
    row = {}
    for key, value in episode.provenance.to_dict().items():
        if isinstance(value, dict):
            value = json.dumps(value, sort_keys=True, separators=(",", ":"))
        row[PROVENANCE_PREFIX + key] = value
    return row


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
