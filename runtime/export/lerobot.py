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

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

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
from runtime.export.sink import FileSink
from runtime.export.stats import aggregate_image_stats, image_stats, stats_by_feature

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
    rows = frame_rows(data, stride)
    frames = len(rows)
    block = {column.lerobot_key: values(column, data)[rows] for column in columns}
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


def _concat(blocks: Sequence[dict[str, np.ndarray]], key: str) -> np.ndarray:
    return np.concatenate([b[key] for b in blocks], axis=0)


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
        matrix = _concat(blocks, key).astype(_NUMPY_TYPES[feature["dtype"]])
        arrays.append(_vector_array(matrix, _ARROW_TYPES[feature["dtype"]]))
        fields.append(pa.field(key, arrays[-1].type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


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


def write_lerobot(source: DatasetSource, sink: FileSink, *, robot_type: str | None) -> dict:
    """Write every file of the dataset for ``source`` into ``sink``; return its totals."""
    loaded = [(_episode_name(e), data) for e, data in source.iter_loaded()]
    columns = common_columns(loaded)
    layout = camera_layout(loaded)
    rate = control_fps(loaded)
    if rate % layout.stride:
        raise TaskMismatch(f"cameras record every {layout.stride} steps of {rate} frames/s: "
                           "not a whole number of frames/s")
    fps = rate // layout.stride
    features = features_of(columns)
    videos = [cam for cam, (_h, _w, modalities) in layout.cameras.items() if "rgb" in modalities]

    # Group episodes into data files by estimated size; an episode never spans two files.
    row_bytes = sum((8 if f["dtype"] == "int64" else 4) * f["shape"][0] for f in features.values())
    limit = DATA_FILES_SIZE_IN_MB * 1024 * 1024
    groups: list[list[int]] = [[]]
    size = 0
    for i, (_name, data) in enumerate(loaded):
        estimate = data.num_actions * row_bytes
        if groups[-1] and size + estimate > limit:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += estimate

    episode_rows: list[dict[str, Any]] = []
    all_blocks: list[dict[str, np.ndarray]] = []
    start = 0
    for file_number, group in enumerate(groups):
        chunk_index, file_index = divmod(file_number, CHUNKS_SIZE)
        blocks = []
        for i in group:
            block = episode_frames(columns, loaded[i][1], i, start, fps, layout.stride)
            count = len(block["index"])
            blocks.append(block)
            episode_rows.append(
                {
                    "episode_index": i,
                    "tasks": [source.instruction],
                    "length": count,
                    "data/chunk_index": chunk_index,
                    "data/file_index": file_index,
                    "dataset_from_index": start,
                    "dataset_to_index": start + count,
                    **_episode_videos(videos, loaded[i][1], i, count, fps, sink),
                    "meta/episodes/chunk_index": 0,
                    "meta/episodes/file_index": 0,
                    **{
                        f"stats/{key}/{stat}": value
                        for key, stats in stats_by_feature(block, list(features)).items()
                        for stat, value in stats.items()
                    },
                }
            )
            start += count
        sink.write(
            DATA_PATH.format(chunk_index=chunk_index, file_index=file_index),
            _parquet_bytes(_frame_table(blocks, features)),
        )
        all_blocks.extend(blocks)

    for row, episode in zip(episode_rows, source.episodes, strict=True):
        for key, value in episode.provenance.to_dict().items():
            if isinstance(value, dict):
                value = json.dumps(value, sort_keys=True, separators=(",", ":"))
            row[PROVENANCE_PREFIX + key] = value
    sink.write(EPISODES_PATH.format(chunk_index=0, file_index=0),
               _parquet_bytes(_episodes_table(episode_rows)))
    sink.write("meta/tasks.parquet", _parquet_bytes(_tasks_table(source.instruction)))
    stats = stats_by_feature({k: _concat(all_blocks, k) for k in features}, list(features))
    for cam in videos:
        key = VIDEO_KEY.format(camera=cam)
        stats[key] = aggregate_image_stats([
            image_stats(d.cameras.cameras[cam].frames["rgb"][: len(frame_rows(d, layout.stride))])
            for _n, d in loaded
        ])
        features[key] = _video_feature(loaded[0][1].videos[cam], layout.cameras[cam], fps)
    sink.write("meta/stats.json", json_bytes(stats))
    total_frames = start
    info = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": len(loaded),
        "total_frames": total_frames,
        "total_tasks": 1,
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": DATA_FILES_SIZE_IN_MB,
        "video_files_size_in_mb": VIDEO_FILES_SIZE_IN_MB,
        "fps": fps,
        "splits": {"train": f"0:{len(loaded)}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if videos else None,
        "features": features,
    }
    sink.write("meta/info.json", json_bytes(info))
    return {"total_episodes": len(loaded), "total_frames": total_frames}


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
        sink.write(
            VIDEO_PATH.format(video_key=key, chunk_index=chunk_index, file_index=file_index),
            data.videos[cam],
        )
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
