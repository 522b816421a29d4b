"""Per-feature statistics in LeRobot's layout: min, max, mean, std, count and quantiles.

Computed exactly over the frames (numpy, float64), per dimension, so the same frames always
give the same numbers; no running histogram approximation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
QUANTILE_KEYS = tuple(f"q{int(round(q * 100)):02d}" for q in QUANTILES)
_SORT_LIMIT = 4096


def feature_stats(array: np.ndarray) -> dict[str, list[Any]]:
    """Stats of ``[frames, width]`` values, each a list of ``width`` numbers (count: [frames])."""
    values = np.asarray(array, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    stats: dict[str, list[Any]] = {
        "min": values.min(axis=0).tolist(),
        "max": values.max(axis=0).tolist(),
        "mean": values.mean(axis=0).tolist(),
        "std": values.std(axis=0).tolist(),
        "count": [int(values.shape[0])],
    }
    if values.shape[0] > _SORT_LIMIT:  # numpy's selection beats a full sort on many frames
        quantiles = np.quantile(values, QUANTILES, axis=0)
        for key, row in zip(QUANTILE_KEYS, quantiles, strict=True):
            stats[key] = row.tolist()
        return stats
    ordered = np.sort(values, axis=0)  # one sort serves every quantile (linear interpolation)
    last = ordered.shape[0] - 1
    for key, q in zip(QUANTILE_KEYS, QUANTILES, strict=True):
        position = q * last
        low = int(np.floor(position))
        high = min(low + 1, last)
        weight = position - low
        stats[key] = (ordered[low] * (1.0 - weight) + ordered[high] * weight).tolist()
    return stats


def stats_by_feature(block: dict[str, np.ndarray], keys: list[str]) -> dict[str, dict]:
    """:func:`feature_stats` of several ``[frames, width]`` features computed in one pass
    over their side-by-side matrix (the same numbers, a fraction of the numpy calls)."""
    parts = [np.asarray(block[k], dtype=np.float64).reshape(len(block[k]), -1) for k in keys]
    merged = feature_stats(np.concatenate(parts, axis=1))
    out: dict[str, dict] = {}
    offset = 0
    for key, part in zip(keys, parts, strict=True):
        width = part.shape[1]
        out[key] = {
            stat: value if stat == "count" else value[offset : offset + width]
            for stat, value in merged.items()
        }
        offset += width
    return out


IMAGE_PIXEL_STEP = 4  # every 4th row and column: LeRobot, too, samples images for stats


def image_stats(frames: np.ndarray) -> dict[str, list[Any]]:
    """Per-channel stats of ``[frames, H, W, C]`` uint8 images scaled to [0, 1], each stat
    shaped ``[C][1][1]`` as LeRobot stores them; computed on a fixed pixel grid."""
    channels = frames.shape[-1]
    grid = frames[:, ::IMAGE_PIXEL_STEP, ::IMAGE_PIXEL_STEP, :]
    flat = grid.reshape(-1, channels).astype(np.float32) / np.float32(255.0)
    base = feature_stats(flat)
    out: dict[str, list[Any]] = {}
    for key, value in base.items():
        out[key] = [int(frames.shape[0])] if key == "count" else [[[v]] for v in value]
    return out


def aggregate_image_stats(parts: list[dict[str, list[Any]]]) -> dict[str, list[Any]]:
    """Dataset-wide image stats from per-episode ones (LeRobot's aggregation): exact min, max,
    mean and std over the counted frames, quantiles as count-weighted means."""
    counts = np.array([p["count"][0] for p in parts], dtype=np.float64)
    total = counts.sum()
    weights = (counts / total)[:, None, None, None]

    def stack(key: str) -> np.ndarray:
        return np.stack([np.asarray(p[key], dtype=np.float64) for p in parts])

    means = stack("mean")
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
