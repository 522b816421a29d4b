"""Per-feature statistics in LeRobot's layout: min, max, mean, std, count and quantiles.

Two levels, as LeRobot keeps them. Per episode (the ``stats/<key>/<stat>`` columns of
``meta/episodes``) every number is exact over the episode's frames, computed for many
episodes at once: one numpy pass per statistic over the side-by-side matrix of every feature
and episode (segment reductions for min/max/mean/std, one sort of a padded cube for the
quantiles), never a Python loop over frames. Dataset-wide (``meta/stats.json``) they are
aggregated from the per-episode ones, as LeRobot aggregates: min, max, count, mean and std are
exact (pooled variance), quantiles are count-weighted means of the episodes' quantiles. So a
dataset that grows by a few episodes gets its stats without re-reading the others, and the
same episodes always give the same numbers, however the dataset was built up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
QUANTILE_KEYS = tuple(f"q{int(round(q * 100)):02d}" for q in QUANTILES)
STAT_KEYS = ("min", "max", "mean", "std", "count", *QUANTILE_KEYS)


_CHUNK_VALUES = 1 << 17  # segment reductions run over about this many values at a time


def segment_stats(matrix: np.ndarray, lengths: Sequence[int]) -> dict[str, np.ndarray]:
    """Exact stats of consecutive row segments of ``[frames, width]`` values: every entry is
    ``[segments, width]`` (``count``: ``[segments]``). Quantiles interpolate linearly.

    min/max/mean/std are segment reductions (``reduceat``) over runs of whole segments of
    about ``_CHUNK_VALUES`` values at a time (one numpy call per statistic for several short
    segments; the temporaries stay in cache: over a whole matrix of a few MB the same calls
    cost twice the CPU here), quantiles come from each segment's columns sorted in a
    lane padded with NaN (sorted last): the same numbers, bit for bit, as the reductions and
    the padded cube sort over the whole matrix that define them (tests/runtime/export/
    test_stats.py). A sort, not ``np.partition``: numpy's SIMD sort of a few hundred values
    is faster than selecting the ten order statistics the five quantiles need."""
    values = np.asarray(matrix, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    counts = np.asarray(lengths, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.intp)
    segments, width = len(counts), values.shape[1]
    out = {key: np.empty((segments, width)) for key in STAT_KEYS if key != "count"}
    out["count"] = counts
    chunk_rows = max(_CHUNK_VALUES // max(width, 1), 1)
    first = 0
    while first < segments:
        last = int(np.searchsorted(starts, starts[first] + chunk_rows, side="right")) - 1
        last = max(last, first + 1)
        _reduce_segments(values, starts[first : last + 1], out, first)
        first = last
    _quantiles(values, starts, counts, out)
    return out


def _reduce_segments(
    values: np.ndarray, bounds: np.ndarray, out: dict[str, np.ndarray], first: int
) -> None:
    """min/max/mean/std of the segments between consecutive ``bounds`` (rows of ``values``),
    written to rows ``first...`` of ``out``."""
    rows = values[bounds[0] : bounds[-1]]
    local = (bounds[:-1] - bounds[0]).astype(np.intp)
    counts = np.diff(bounds)
    done = slice(first, first + len(counts))
    mean = np.add.reduceat(rows, local, axis=0) / counts[:, None]
    spread = rows - np.repeat(mean, counts, axis=0)
    np.multiply(spread, spread, out=spread)
    out["mean"][done] = mean
    out["std"][done] = np.sqrt(np.add.reduceat(spread, local, axis=0) / counts[:, None])
    out["min"][done] = np.minimum.reduceat(rows, local, axis=0)
    out["max"][done] = np.maximum.reduceat(rows, local, axis=0)


def _quantiles(
    values: np.ndarray, starts: np.ndarray, counts: np.ndarray, out: dict[str, np.ndarray]
) -> None:
    width = values.shape[1]
    lane = np.empty((width, int(counts.max())))
    quantiles = np.asarray(QUANTILES)
    for number, count in enumerate(counts.tolist()):
        start = int(starts[number])
        lane[:, :count] = values[start : start + count].T
        lane[:, count:] = np.nan
        lane.sort(axis=-1)
        position = quantiles * (count - 1)
        low = np.floor(position).astype(np.intp)
        high = np.minimum(low + 1, count - 1)
        weight = position - low
        picked = lane[:, low] * (1.0 - weight) + lane[:, high] * weight  # [width, quantiles]
        for column, key in enumerate(QUANTILE_KEYS):
            out[key][number] = picked[:, column]


IMAGE_PIXEL_STEP = 4  # every 4th row and column: LeRobot, too, samples images for stats


def image_stats(frames: np.ndarray) -> dict[str, list[Any]]:
    """Per-channel stats of ``[frames, H, W, C]`` uint8 images scaled to [0, 1], each stat
    shaped ``[C][1][1]`` as LeRobot stores them; computed on a fixed pixel grid."""
    channels = frames.shape[-1]
    grid = frames[:, ::IMAGE_PIXEL_STEP, ::IMAGE_PIXEL_STEP, :]
    flat = grid.reshape(-1, channels).astype(np.float32) / np.float32(255.0)
    base = segment_stats(flat, [flat.shape[0]])
    out: dict[str, list[Any]] = {}
    for key in STAT_KEYS:
        out[key] = [int(frames.shape[0])] if key == "count" else [[[v]] for v in base[key][0]]
    return out


def stat_matrices(
    rows: Sequence[dict[str, Any]], keys: Sequence[str], column: Any
) -> dict[str, np.ndarray]:
    """Every statistic of several vector features side by side, one row per episode
    (``column(row, key, stat)`` -> that episode's list): ``[episodes, sum of widths]`` each
    (``count``: ``[episodes]``). A dataset that grows appends rows to them."""
    out = {"count": np.array([column(row, keys[0], "count")[0] for row in rows],
                             dtype=np.float64)}
    for stat in STAT_KEYS:
        if stat != "count":
            out[stat] = np.array(
                [[v for key in keys for v in column(row, key, stat)] for row in rows],
                dtype=np.float64,
            ).reshape(len(rows), -1)
    return out


def aggregate_many(
    rows: Sequence[dict[str, Any]], keys: Sequence[str], column: Any
) -> dict[str, dict[str, list[Any]]]:
    """:func:`aggregate_stats` of several vector features at once, from per-episode rows
    (``column(row, key, stat)`` -> that episode's list): one numpy pass per statistic."""
    widths = [len(column(rows[0], key, "min")) for key in keys]
    return aggregate_matrices(stat_matrices(rows, keys, column), keys, widths)


def aggregate_matrices(
    matrices: dict[str, np.ndarray], keys: Sequence[str], widths: Sequence[int]
) -> dict[str, dict[str, list[Any]]]:
    """:func:`aggregate_many` from :func:`stat_matrices` (the same numbers, bit for bit)."""
    counts = matrices["count"]
    bounds = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64).tolist()
    total = counts.sum()
    weights = (counts / total)[:, None]
    means = matrices["mean"]
    mean = (means * weights).sum(axis=0)
    variance = ((matrices["std"] ** 2 + (means - mean) ** 2) * weights).sum(axis=0)
    merged = {
        "min": matrices["min"].min(axis=0).tolist(),
        "max": matrices["max"].max(axis=0).tolist(),
        "mean": mean.tolist(),
        "std": np.sqrt(variance).tolist(),
    }
    for key in QUANTILE_KEYS:
        merged[key] = (matrices[key] * weights).sum(axis=0).tolist()
    return {
        key: {
            stat: [int(total)] if stat == "count" else merged[stat][low:high]
            for stat in STAT_KEYS
        }
        for key, low, high in zip(keys, bounds[:-1], bounds[1:], strict=True)
    }


def aggregate_stats(parts: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """Dataset-wide stats of one feature from its per-episode stats (LeRobot's aggregation):
    exact min, max, count, mean and pooled std; quantiles as count-weighted means. Shapes are
    kept (``[width]`` for vectors, ``[C][1][1]`` for images)."""
    counts = np.array([p["count"][0] for p in parts], dtype=np.float64)
    total = counts.sum()

    def stack(key: str) -> np.ndarray:
        return np.stack([np.asarray(p[key], dtype=np.float64) for p in parts])

    means = stack("mean")
    weights = (counts / total).reshape((-1,) + (1,) * (means.ndim - 1))
    mean = (means * weights).sum(axis=0)
    variance = ((stack("std") ** 2 + (means - mean) ** 2) * weights).sum(axis=0)
    out: dict[str, list[Any]] = {
        "min": stack("min").min(axis=0).tolist(),
        "max": stack("max").max(axis=0).tolist(),
        "mean": mean.tolist(),
        "std": np.sqrt(variance).tolist(),
        "count": [int(total)],
    }
    for key in QUANTILE_KEYS:
        out[key] = (stack(key) * weights).sum(axis=0).tolist()
    return out
