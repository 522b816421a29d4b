"""The LeRobot v3.0 layout, dtypes and values of an export, checked file by file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runtime.export import DatasetSpec, export_runs
from tests.runtime.export.conftest import CollectedRun, camera_stride, data_table, trajectories


@pytest.fixture(scope="module")
def exported(collected: CollectedRun, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lerobot") / "dataset"
    export_runs(collected.store(), [collected.run_id], DatasetSpec("lerobot", out))
    return out


def test_info_json_is_v30_with_features_totals_and_paths(
    exported: Path, collected: CollectedRun
) -> None:
    info = json.loads((exported / "meta" / "info.json").read_text())
    episodes = trajectories(collected)
    stride = camera_stride(collected)
    frames = sum(len(range(0, t["actions"].shape[0], stride)) for t in episodes)
    assert info["codebase_version"] == "v3.0"
    assert info["fps"] == 50 // stride  # 2 ms physics x 10 steps per control interval
    assert info["total_episodes"] == len(episodes)
    assert info["total_frames"] == frames
    assert info["total_tasks"] == 1
    assert info["splits"] == {"train": f"0:{len(episodes)}"}
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    video_path = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    assert info["video_path"] == (video_path if stride > 1 else None)
    assert (info["chunks_size"], info["data_files_size_in_mb"]) == (1000, 100)
    features = info["features"]
    columns = episodes[0]["metadata"]["columns"]
    assert features["observation.state"] == {
        "dtype": "float32", "shape": [7], **columns["robot_qpos"]
    }
    assert features["action"] == {"dtype": "float32", "shape": [7], **columns["actions"]}
    assert features["observation.state"]["units"][0] == "m"
    assert features["observation.entity_pose"]["names"][:2] == ["item.x", "item.y"]
    assert features["observation.entity_pose"]["shape"] == [14]
    for key in ("timestamp",):
        assert features[key] == {"dtype": "float32", "shape": [1], "names": None}
    for key in ("frame_index", "episode_index", "index", "task_index"):
        assert features[key] == {"dtype": "int64", "shape": [1], "names": None}
    assert features["next.done"]["dtype"] == "bool"


def test_data_parquet_schema_and_values_equal_the_trajectories(
    exported: Path, collected: CollectedRun
) -> None:
    table = data_table(exported)
    schema = table.schema
    assert schema.field("observation.state").type == pa.list_(pa.float32(), 7)
    assert schema.field("action").type == pa.list_(pa.float32(), 7)
    assert schema.field("timestamp").type == pa.float32()
    assert schema.field("index").type == pa.int64()
    assert schema.field("next.done").type == pa.bool_()
    assert schema.metadata is None or b"pandas" not in schema.metadata
    columns = table.to_pydict()
    start = 0
    stride = camera_stride(collected)
    for number, traj in enumerate(trajectories(collected)):
        picked = np.arange(0, traj["actions"].shape[0], stride)
        steps = len(picked)
        rows = slice(start, start + steps)
        state = np.array(columns["observation.state"][rows], dtype=np.float32)
        np.testing.assert_array_equal(state, traj["robot_qpos"][picked].astype(np.float32))
        action = np.array(columns["action"][rows], dtype=np.float32)
        np.testing.assert_array_equal(action, traj["actions"][picked].astype(np.float32))
        assert columns["episode_index"][rows] == [number] * steps
        assert columns["frame_index"][rows] == list(range(steps))
        assert columns["index"][rows] == list(range(start, start + steps))
        fps = 50 // stride
        np.testing.assert_allclose(columns["timestamp"][rows], np.arange(steps) / fps, atol=1e-6)
        assert columns["next.done"][rows] == [False] * (steps - 1) + [True]
        start += steps
    assert table.num_rows == start


def test_episodes_metadata_has_lerobot_columns_and_provenance(
    exported: Path, collected: CollectedRun
) -> None:
    table = pq.read_table(exported / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    rows = table.to_pylist()
    events = collected.store().read(collected.run_id)
    commits = {
        (e.payload["batch_index"], e.payload["episode_index"]): (e.seq, e.payload["sha256"])
        for e in events
        if e.type == "TrajectoryCommitted"
    }
    resolved = {e.payload["batch_index"]: e.payload for e in events if e.type == "BatchResolved"}
    frame = 0
    for number, (row, key) in enumerate(zip(rows, sorted(commits), strict=True)):
        assert row["episode_index"] == number
        assert row["tasks"] == ["Pick up the item, then place the item in the bin."]
        span = (row["dataset_from_index"], row["dataset_to_index"])
        assert span == (frame, frame + row["length"])
        # one data file per batch: the batches of this run are 0, 1, ...
        assert (row["data/chunk_index"], row["data/file_index"]) == (0, key[0])
        assert row["stats/action/count"] == [row["length"]]
        assert len(row["stats/observation.state/q99"]) == 7
        assert row["assetcast/run_id"] == collected.run_id
        assert (row["assetcast/batch_index"], row["assetcast/episode_index"]) == key
        assert (row["assetcast/commit_seq"], row["assetcast/trajectory_sha256"]) == commits[key]
        batch = resolved[key[0]]
        assert row["assetcast/asset_set_id"] == batch["asset_set_id"]
        assert json.loads(row["assetcast/assets"]) == batch["assets"]
        frame += row["length"]


def test_tasks_parquet_keeps_the_instruction_as_pandas_index(exported: Path) -> None:
    table = pq.read_table(exported / "meta" / "tasks.parquet")
    pandas_meta = json.loads(table.schema.metadata[b"pandas"])
    assert pandas_meta["index_columns"] == ["__index_level_0__"]
    assert table.to_pydict() == {
        "task_index": [0],
        "__index_level_0__": ["Pick up the item, then place the item in the bin."],
    }


def test_stats_hold_min_max_mean_std_count_and_quantiles(
    exported: Path, collected: CollectedRun
) -> None:
    stats = json.loads((exported / "meta" / "stats.json").read_text())
    stride = camera_stride(collected)
    actions = np.concatenate(
        [t["actions"][::stride] for t in trajectories(collected)]
    ).astype(np.float32)
    action = stats["action"]
    assert set(action) == {"min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"}
    assert action["count"] == [actions.shape[0]]
    np.testing.assert_allclose(action["min"], actions.min(axis=0), rtol=1e-6)
    np.testing.assert_allclose(action["max"], actions.max(axis=0), rtol=1e-6)
    np.testing.assert_allclose(action["mean"], actions.astype(np.float64).mean(axis=0),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(action["std"], actions.astype(np.float64).std(axis=0),
                               rtol=1e-5, atol=1e-7)
    # Quantiles: exact per episode (meta/episodes), count-weighted over the dataset, as
    # LeRobot aggregates them.
    rows = pq.read_table(exported / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    weights = np.array([r["length"] for r in rows], dtype=np.float64)
    for row, traj in zip(rows, trajectories(collected), strict=True):
        own = traj["actions"][::stride].astype(np.float32)
        np.testing.assert_allclose(row["stats/action/q50"], np.quantile(own, 0.5, axis=0),
                                   atol=1e-6)
        np.testing.assert_allclose(row["stats/action/q10"], np.quantile(own, 0.1, axis=0),
                                   atol=1e-6)
    weighted = (np.array([r["stats/action/q50"] for r in rows]) * weights[:, None]).sum(0)
    np.testing.assert_allclose(action["q50"], weighted / weights.sum(), rtol=1e-12)
    assert stats["index"]["max"] == [actions.shape[0] - 1]


def test_same_log_gives_byte_identical_files(
    exported: Path, collected: CollectedRun, tmp_path: Path
) -> None:
    again = tmp_path / "again"
    export_runs(collected.store(), [collected.run_id], DatasetSpec("lerobot", again))
    first = sorted(p.relative_to(exported) for p in exported.rglob("*") if p.is_file())
    second = sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert first == second
    for rel in first:
        assert (exported / rel).read_bytes() == (again / rel).read_bytes(), rel
