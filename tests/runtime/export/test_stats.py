"""Per-episode stats computed segment by segment are bit for bit those of the whole-matrix
computation the dataset bytes were first defined by (a changed number is a changed file)."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.export import stats
from runtime.export.stats import QUANTILE_KEYS, QUANTILES, STAT_KEYS, segment_stats


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


def _random_segments(seed: int) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    lengths = [int(n) for n in rng.integers(1, 400, size=9)] + [1, 2, 1]
    values = rng.standard_normal((sum(lengths), 11)) * 10.0 ** rng.integers(-8, 8, size=11)
    values[:, 3] = np.round(values[:, 3])  # many ties
    values[:: 7, 4] = -0.0
    values[1:: 7, 4] = 0.0
    values[:, 5] = np.arange(len(values)) / 30.0  # sorted already, like timestamps
    values[:, 6] = 7.0  # constant, like a task index
    return values, lengths


@pytest.mark.parametrize("seed", range(4))
def test_segment_stats_equal_the_whole_matrix_computation_bit_for_bit(seed: int) -> None:
    values, lengths = _random_segments(seed)
    got = segment_stats(values, lengths)
    expected = _whole_matrix_stats(values, lengths)
    assert got.keys() == expected.keys()
    for key in expected:
        assert got[key].shape == expected[key].shape, key
        assert got[key].tobytes() == expected[key].tobytes(), key


@pytest.mark.parametrize("lengths", [[1], [1, 1, 1], [5, 1, 2]])
def test_one_frame_episodes_and_width_one_features(lengths: list[int]) -> None:
    values = np.arange(sum(lengths), dtype=np.float64)[:, None] * 1.5
    got = segment_stats(values, lengths)
    expected = _whole_matrix_stats(values, lengths)
    for key in expected:
        assert got[key].tobytes() == expected[key].tobytes(), key
    assert got["min"].shape == (len(lengths), 1)
    first = 0
    for number, count in enumerate(lengths):
        episode = values[first : first + count, 0]
        first += count
        assert got["min"][number, 0] == episode.min() and got["max"][number, 0] == episode.max()
        assert got["mean"][number, 0] == pytest.approx(episode.mean())
        for key, q in zip(QUANTILE_KEYS, QUANTILES, strict=True):
            assert got[key][number, 0] == pytest.approx(np.quantile(episode, q))


def test_image_stats_are_per_channel_in_lerobots_shape() -> None:
    frames = np.zeros((2, 8, 8, 3), dtype=np.uint8)
    frames[..., 1] = 255
    frames[1, ..., 2] = 51
    got = stats.image_stats(frames)
    assert got["count"] == [2]
    assert got["min"] == [[[0.0]], [[1.0]], [[0.0]]]
    assert got["max"] == [[[0.0]], [[1.0]], [[pytest.approx(0.2)]]]
    assert set(got) == set(STAT_KEYS)
