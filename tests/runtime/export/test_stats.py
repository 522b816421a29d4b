"""Per-episode stats computed segment by segment are bit for bit those of the whole-matrix
computation the dataset bytes were first defined by (a changed number is a changed file)."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.export.stats import QUANTILE_KEYS, QUANTILES, episode_stats, segment_stats


def _whole_matrix_stats(values: np.ndarray, lengths: list[int]) -> dict[str, np.ndarray]:
    """The original formulation: reductions over all segments at once, quantiles from one
    NaN-padded cube sorted along the frame axis."""
    counts = np.asarray(lengths, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.intp)
    mean = np.add.reduceat(values, starts, axis=0) / counts[:, None]
    spread = values - np.repeat(mean, counts, axis=0)
    out = {
        "min": np.minimum.reduceat(values, starts, axis=0),
        "max": np.maximum.reduceat(values, starts, axis=0),
        "mean": mean,
        "std": np.sqrt(np.add.reduceat(spread * spread, starts, axis=0) / counts[:, None]),
        "count": counts,
    }
    cube = np.full((len(counts), int(counts.max()), values.shape[1]), np.nan)
    for number, (start, count) in enumerate(zip(starts, counts, strict=True)):
        cube[number, :count] = values[start : start + count]
    cube.sort(axis=1)
    rows = np.arange(len(counts))
    last = counts - 1
    for key, q in zip(QUANTILE_KEYS, QUANTILES, strict=True):
        position = q * last
        low = np.floor(position).astype(np.intp)
        high = np.minimum(low + 1, last)
        weight = (position - low)[:, None]
        out[key] = cube[rows, low] * (1.0 - weight) + cube[rows, high] * weight
    return out


@pytest.mark.parametrize("seed", range(4))
def test_segment_stats_equal_the_whole_matrix_computation_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = [int(n) for n in rng.integers(1, 400, size=9)] + [1, 2]
    values = rng.standard_normal((sum(lengths), 11)) * 10.0 ** rng.integers(-8, 8, size=11)
    values[:, 3] = np.round(values[:, 3])  # many ties
    values[:: 7, 4] = -0.0
    values[1:: 7, 4] = 0.0
    values[:, 5] = np.arange(len(values)) / 30.0  # sorted already, like timestamps
    got = segment_stats(values, lengths)
    expected = _whole_matrix_stats(values, lengths)
    assert got.keys() == expected.keys()
    for key in expected:
        assert got[key].shape == expected[key].shape, key
        assert got[key].tobytes() == expected[key].tobytes(), key


def test_episode_stats_give_each_feature_its_columns_as_lists() -> None:
    blocks = [
        {"a": np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]]), "flag": np.array([[True]] * 3)},
        {"a": np.array([[0.5, -1.0]]), "flag": np.array([[False]])},
    ]
    stats = episode_stats(blocks, ["a", "flag"])
    assert stats[0]["a"]["min"] == [1.0, 2.0]
    assert stats[0]["a"]["max"] == [5.0, 9.0]
    assert stats[0]["a"]["mean"] == [3.0, 5.0]
    assert stats[0]["a"]["q50"] == [3.0, 4.0]
    assert stats[0]["a"]["count"] == [3]
    assert stats[1]["a"]["q99"] == [0.5, -1.0]
    assert stats[1]["flag"]["mean"] == [0.0]
    assert stats[0]["flag"]["std"] == [0.0]
