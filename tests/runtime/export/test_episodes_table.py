"""``meta/episodes`` built column by column from the stats matrices is the table the
per-episode definition gives (one row dict per episode, every stat a Python list), byte for
byte once encoded; and a version extended from the previous file read back from disk (a new
process) is the same as one built whole."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runtime.export.lerobot import _parquet_bytes
from runtime.export.lerobot_episodes import (
    EpisodesTable,
    _read,
    build_table,
    extended_table,
    remember,
    stat_column,
)
from runtime.export.stats import STAT_KEYS, segment_stats

KEYS = ("observation.state", "next.done", "index")
WIDTHS = (3, 1, 1)


def _case(seed: int, lengths: list[int]) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((sum(lengths), sum(WIDTHS)))
    values[:, 3] = rng.integers(0, 2, size=len(values))
    values[:, 4] = np.arange(len(values))
    rows = [
        {"episode_index": i, "tasks": ["put it in the bin"], "length": n,
         "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0,
         "assetcast/run_id": f"run-{seed}", "assetcast/to_timestamp": n / 50}
        for i, n in enumerate(lengths)
    ]
    return rows, segment_stats(values, lengths)


def _per_episode_table(rows: list[dict[str, Any]], matrices: dict[str, np.ndarray]) -> pa.Table:
    """The definition: each episode's row with its stats as lists, one Arrow column per key
    inferred from the values (as the writer did before it went columnar)."""
    full = []
    for number, row in enumerate(rows):
        out: dict[str, Any] = {}
        for key, value in row.items():
            out[key] = value
            if key == "meta/episodes/file_index":
                low = 0
                for feature, width in zip(KEYS, WIDTHS, strict=True):
                    for stat in STAT_KEYS:
                        out[stat_column(feature, stat)] = (
                            [int(matrices["count"][number])] if stat == "count"
                            else matrices[stat][number, low : low + width].tolist())
                    low += width
        full.append(out)
    arrays = {}
    for key in full[0]:
        column = [row[key] for row in full]
        if key == "tasks":
            arrays[key] = pa.array(column, type=pa.list_(pa.string()))
        elif isinstance(column[0], list):
            arrays[key] = pa.array(column, type=pa.list_(
                pa.int64() if key.endswith("/count") else pa.float64()))
        else:
            arrays[key] = pa.array(column)
    return pa.table(arrays)


@pytest.mark.parametrize("lengths", [[1], [1, 1, 4], [30, 2, 1, 17]])
def test_columnar_table_is_the_per_episode_table(lengths: list[int]) -> None:
    rows, matrices = _case(len(lengths), lengths)
    table = build_table(rows, KEYS, WIDTHS, matrices)
    expected = _per_episode_table(rows, matrices)
    assert table.equals(expected)
    assert bytes(_parquet_bytes(table)) == bytes(_parquet_bytes(expected))


def test_matrices_derived_from_the_file_equal_the_ones_it_was_built_from(tmp_path: Path) -> None:
    rows, matrices = _case(7, [5, 1, 3])
    path = tmp_path / "episodes.parquet"
    path.write_bytes(bytes(_parquet_bytes(build_table(rows, KEYS, WIDTHS, matrices))))
    parsed = EpisodesTable(pq.read_table(path))
    derived = parsed.matrices(KEYS)
    assert derived.keys() == matrices.keys()
    for stat in matrices:
        assert derived[stat].tobytes() == matrices[stat].astype(np.float64).tobytes(), stat


@pytest.mark.parametrize("from_disk", [False, True])
def test_an_extended_table_is_the_table_built_whole(tmp_path: Path, from_disk: bool) -> None:
    rows, matrices = _case(3, [4, 1, 6, 2, 9])
    whole = bytes(_parquet_bytes(build_table(rows, KEYS, WIDTHS, matrices)))
    first = {stat: value[:3] for stat, value in matrices.items()}
    written = EpisodesTable(build_table(rows[:3], KEYS, WIDTHS, first), {KEYS: first})
    previous = written
    if from_disk:
        path = tmp_path / "previous.parquet"
        path.write_bytes(bytes(_parquet_bytes(written.table)))
        remember("another version", written)  # nothing of this process is reused
        previous = _read(path, "digest of the file")  # type: ignore[assignment]
        assert previous is not written and not previous._matrices  # parsed, not remembered
    fresh = {stat: value[3:] for stat, value in matrices.items()}
    for reused in (3, 2):  # the previous version's rows, or fewer of them
        again = {stat: value[reused:] for stat, value in matrices.items()}
        extended = extended_table(previous, reused, rows[reused:], KEYS, WIDTHS,
                                  fresh if reused == 3 else again)
        assert bytes(_parquet_bytes(extended.table)) == whole, reused
        assert pq.read_table(io.BytesIO(whole)).num_rows == extended.num_rows
        for stat in matrices:
            got = extended.matrices(KEYS)[stat].astype(np.float64)
            assert got.tobytes() == matrices[stat].astype(np.float64).tobytes(), stat
    # Nothing new at all: the previous rows alone, built whole again.
    none = {stat: value[:0] for stat, value in matrices.items()}
    alone = extended_table(previous, 3, [], KEYS, WIDTHS, none)
    assert bytes(_parquet_bytes(alone.table)) == bytes(_parquet_bytes(written.table))
