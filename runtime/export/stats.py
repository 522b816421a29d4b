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

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
QUANTILE_KEYS = tuple(f"q{int(round(q * 100)):02d}" for q in QUANTILES)
STAT_KEYS = ("min", "max", "mean", "std", "count", *QUANTILE_KEYS)


def segment_stats(matrix: np.ndarray, lengths: Sequence[int]) -> dict[str, np.ndarray]:
    """Exact stats of consecutive row segments of ``[frames, width]`` values: every entry is
    ``[segments, width]`` (``count``: ``[segments]``). Quantiles interpolate linearly.

    One segment at a time, with the same operations as over the whole matrix (a reduction
    over each segment's rows, its deviations from its own mean), so the numbers are the same;
    only the temporaries shrink to one segment's size (fresh arrays of the whole matrix cost
    a page fault per 4 KiB). Each column's values are sorted in a lane padded with NaN
    (sorted last) to the longest segment; a sort, not ``np.partition``: numpy's SIMD sort of
    a few hundred values is faster than selecting the ten order statistics the quantiles
    need."""
    values = np.asarray(matrix, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    counts = np.asarray(lengths, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.intp)
    segments, width = len(counts), values.shape[1]
    out = {key: np.empty((segments, width)) for key in STAT_KEYS if key != "count"}
    out["count"] = counts
    lane = np.empty((width, int(counts.max())))
    first = [0]
    for number, (start, count) in enumerate(zip(starts.tolist(), counts.tolist(), strict=True)):
        rows = values[start : start + count]
        mean = np.add.reduceat(rows, first, axis=0)[0] / count
        spread = rows - mean
        np.multiply(spread, spread, out=spread)
        out["mean"][number] = mean
        out["std"][number] = np.sqrt(np.add.reduceat(spread, first, axis=0)[0] / count)
        out["min"][number] = np.minimum.reduceat(rows, first, axis=0)[0]
        out["max"][number] = np.maximum.reduceat(rows, first, axis=0)[0]
        lane[:, :count] = rows.T
        lane[:, count:] = np.nan
        lane.sort(axis=-1)
        last = count - 1
        for key, q in zip(QUANTILE_KEYS, QUANTILES, strict=True):
            position = q * last
            low = math.floor(position)
            high = min(low + 1, last)
            weight = position - low
            out[key][number] = lane[:, low] * (1.0 - weight) + lane[:, high] * weight
    return out


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


def aggregate_matrices(
    matrices: dict[str, np.ndarray], keys: Sequence[str], widths: Sequence[int]
) -> dict[str, dict[str, list[Any]]]:
    """Dataset-wide stats of several vector features from their per-episode stats side by
    side (``stat -> [episodes, sum of widths]``, ``count``: ``[episodes]``): what
    :func:`aggregate_stats` gives per feature, one numpy pass per statistic."""
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
