"""The frames of a LeRobot dataset's new episodes as one float64 matrix.

Why one matrix: every per-frame feature of every new episode (the trajectory's arrays and
the index columns LeRobot adds) lands side by side in ``[frames, sum of widths]`` once; the
per-episode stats are segment reductions over it and each data file is a slice of its rows,
cast to the feature's dtype. Building per-episode blocks and concatenating them again for
the stats and again for every file cost more Python calls than the numbers themselves.
The values are exact: the index columns are integers far below 2**53, and a float32 or bool
column cast from its float64 value is the cast of the original.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from runtime.export.episodes import EpisodeData
from runtime.export.features import Column, values

INDEX_FEATURES = ("timestamp", "frame_index", "episode_index", "index", "task_index")
_ARROW_TYPES = {"float32": pa.float32(), "int64": pa.int64(), "bool": pa.bool_()}
_NUMPY_TYPES = {"float32": np.float32, "int64": np.int64, "bool": np.bool_}


def _feature(dtype: str, width: int, names: Sequence[str] | None) -> dict[str, Any]:
    return {"dtype": dtype, "shape": [width], "names": list(names) if names is not None else None}


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


@dataclass(frozen=True)
class FrameMatrix:
    """Frames of some episodes, in order: ``values[first[i] : first[i] + lengths[i]]`` are
    episode ``i``'s; feature ``key`` is columns ``bounds[key]``."""

    values: np.ndarray
    bounds: dict[str, tuple[int, int]]
    first: dict[int, int]
    lengths: dict[int, int]

    def rows(self, episodes: Sequence[int]) -> np.ndarray:
        """The rows of consecutive ``episodes`` (a view)."""
        start = self.first[episodes[0]]
        return self.values[start : self.first[episodes[-1]] + self.lengths[episodes[-1]]]


def frame_matrix(
    columns: Sequence[Column], features: dict[str, dict[str, Any]],
    episodes: Sequence[tuple[int, EpisodeData]], starts: Sequence[int], fps: int, stride: int,
) -> FrameMatrix:
    """Every feature of ``episodes`` (index, data; every ``stride``-th control step) as one
    matrix: frame ``i`` holds the observation before action ``i`` and that action, the last
    frame is ``next.done`` (reward 1), ``index`` counts from ``starts[episode]``."""
    widths = [feature["shape"][0] for feature in features.values()]
    edges = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64).tolist()
    bounds = {key: (edges[n], edges[n + 1]) for n, key in enumerate(features)}
    lengths = [len(range(0, data.num_actions, stride)) for _i, data in episodes]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    matrix = np.empty((int(offsets[-1]), edges[-1]))
    for (_i, data), start, count in zip(episodes, offsets[:-1].tolist(), lengths, strict=True):
        taken = slice(0, data.num_actions, stride)
        for column in columns:
            low, high = bounds[column.lerobot_key]
            matrix[start : start + count, low:high] = values(column, data)[taken]
    counts = np.asarray(lengths, dtype=np.int64)
    frame_index = np.arange(int(offsets[-1]), dtype=np.int64) - np.repeat(offsets[:-1], counts)
    done = frame_index == np.repeat(counts - 1, counts)
    ids = np.asarray([i for i, _data in episodes], dtype=np.int64)
    index_columns = {
        "next.reward": done, "next.done": done, "timestamp": frame_index / fps,
        "frame_index": frame_index, "episode_index": np.repeat(ids, counts),
        "index": np.repeat(np.asarray([starts[i] for i in ids.tolist()], dtype=np.int64), counts)
        + frame_index,
        "task_index": 0,
    }
    for key, column_values in index_columns.items():
        matrix[:, bounds[key][0]] = column_values
    return FrameMatrix(
        matrix, bounds,
        {i: int(first) for (i, _data), first in zip(episodes, offsets[:-1].tolist(), strict=True)},
        {i: count for (i, _data), count in zip(episodes, lengths, strict=True)},
    )


def _vector_array(matrix: np.ndarray, dtype: pa.DataType) -> pa.Array:
    """``[rows, width]`` -> a fixed-size list column (HF ``Sequence(length=width)``); width 1
    -> a scalar column (LeRobot maps shape ``(1,)`` to a plain value)."""
    _rows, width = matrix.shape
    flat = pa.array(np.ascontiguousarray(matrix).reshape(-1), type=dtype)
    if width == 1:
        return flat
    return pa.FixedSizeListArray.from_arrays(flat, width)


def frame_table(
    frames: FrameMatrix, episodes: Sequence[int], features: dict[str, dict[str, Any]]
) -> pa.Table:
    """The data file of consecutive ``episodes``: one column per feature, in its dtype."""
    rows = frames.rows(episodes)
    arrays, names = [], []
    for key, feature in features.items():
        low, high = frames.bounds[key]
        typed = rows[:, low:high].astype(_NUMPY_TYPES[feature["dtype"]])
        arrays.append(_vector_array(typed, _ARROW_TYPES[feature["dtype"]]))
        names.append(key)
    return pa.Table.from_arrays(arrays, names=names)
