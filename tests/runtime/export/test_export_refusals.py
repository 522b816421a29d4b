"""Bad input to `export`: one-line errors of the exact class, and nothing written outside a
temporary place (the target folder keeps exactly what it had)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from runtime.cli import main
from runtime.export import DatasetSpec, export_runs
from runtime.export.errors import (
    NoAcceptedEpisodes,
    NotADataset,
    TaskMismatch,
    TrajectoryVerificationFailed,
)
from tests.runtime.export.conftest import CollectedRun


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture(scope="module")
def prepared_only(collected: CollectedRun) -> str:
    """A run of the same task that was prepared but never collected (no accepted episode)."""
    from runtime.collection.demo_run import prepare_demo_run

    return prepare_demo_run(
        collected.store(), collected.root / "prepared-only", collected.catalog, batches=1,
        episodes_per_batch=1, settle_steps=0,
    )


def test_run_without_accepted_episode(collected: CollectedRun, prepared_only: str,
                                      tmp_path: Path) -> None:
    with pytest.raises(NoAcceptedEpisodes, match=rf"run\(s\) {prepared_only} have no committed"):
        export_runs(collected.store(), [prepared_only], DatasetSpec("lerobot", tmp_path / "d"))
    with pytest.raises(NoAcceptedEpisodes, match=rf"run\(s\) {prepared_only} have no committed"):
        export_runs(collected.store(), [collected.run_id, prepared_only],
                    DatasetSpec("lerobot", tmp_path / "d"))
    assert _listing(tmp_path) == []


@pytest.mark.parametrize("fmt", ["lerobot", "robomimic"])
def test_existing_path_that_is_not_a_dataset_is_left_alone(
    collected: CollectedRun, tmp_path: Path, fmt: str
) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    plain = tmp_path / "plain.hdf5"
    plain.write_text("not hdf5")
    before = _listing(tmp_path)
    for target in (folder, plain):
        with pytest.raises(NotADataset, match=f"{target} exists and is not an assetcast"):
            export_runs(collected.store(), [collected.run_id], DatasetSpec(fmt, target))
    assert _listing(tmp_path) == before
    assert (folder / "notes.txt").read_text() == "keep me"
    assert plain.read_text() == "not hdf5"


def test_dataset_of_the_other_format_is_refused(collected: CollectedRun, tmp_path: Path) -> None:
    out = tmp_path / "x.hdf5"
    export_runs(collected.store(), [collected.run_id], DatasetSpec("robomimic", out))
    with pytest.raises(NotADataset, match="exists and is not an assetcast dataset"):
        export_runs(collected.store(), [collected.run_id], DatasetSpec("lerobot", out))


def test_runs_of_different_tasks(collected: CollectedRun, tmp_path: Path) -> None:
    from domain.config import CollectionConfig
    from runtime.collection.demo_run import demo_task_path
    from runtime.prepare import prepare, providers_from_catalog_args

    task = yaml.safe_load(demo_task_path().read_text())
    task["task_id"] = "another_task"
    task_file = tmp_path / "task.yaml"
    task_file.write_text(yaml.safe_dump(task))
    catalog = collected.catalog
    providers = providers_from_catalog_args([f"item={catalog}", f"bin={catalog}"])
    other = prepare(task_file, providers, cfg=CollectionConfig(max_batches=1),
                    output_dir=tmp_path / "other", store=collected.store()).run_id
    out = tmp_path / "d"
    with pytest.raises(TaskMismatch, match=rf"runs {collected.run_id} and {other} are of "
                       r"different tasks \('place_item_in_bin' and 'another_task'\)"):
        export_runs(collected.store(), [collected.run_id, other], DatasetSpec("lerobot", out))
    assert not out.exists() and not (tmp_path / ".d.assetcast").exists()


def test_trajectory_that_fails_verification(collected: CollectedRun, tmp_path: Path) -> None:
    import sqlite3

    from store import EventStore

    # SQLite's backup, never a file copy: reading and closing the live database file here
    # would cancel this process's SQLite locks on it (POSIX drops them all on any close).
    copy = tmp_path / "copy"
    copy.mkdir()
    with sqlite3.connect(collected.db_url.removeprefix("sqlite:///")) as source, \
            sqlite3.connect(copy / "assetcast.db") as target:
        source.backup(target)
    store = EventStore(f"sqlite:///{copy / 'assetcast.db'}")
    # The run's output dir is absolute in the log: damage the original file, then restore it.
    receipt = next(e.payload for e in store.read(collected.run_id)
                   if e.type == "TrajectoryCommitted")
    target = collected.output_dir / receipt["path"]
    original = target.read_bytes()
    try:
        target.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        out = tmp_path / "d"
        with pytest.raises(TrajectoryVerificationFailed,
                           match=rf"trajectory {target} .* has SHA-256 [0-9a-f]{{64}}, the log "
                           rf"recorded {receipt['sha256']}"):
            export_runs(store, [collected.run_id], DatasetSpec("lerobot", out))
        assert not out.exists()
        assert not (tmp_path / ".d.assetcast").exists()
    finally:
        target.write_bytes(original)


def test_cli_one_line_errors(collected: CollectedRun, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    code = main(["--db", collected.db_url, "export", collected.run_id, "--format", "lerobot",
                 "--out", str(folder)])
    assert code == 2
    assert capsys.readouterr().err == (
        f"assetcast: error: {folder} exists and is not an assetcast dataset\n"
    )
    code = main(["--db", collected.db_url, "export", "run-nope", "--format", "lerobot",
                 "--out", str(tmp_path / "d")])
    assert code == 2
    assert "run-nope" in capsys.readouterr().err
    code = main(["--db", collected.db_url, "run", "t.yaml", "--catalog", "a=b", "--out", "o",
                 "--dataset", "parquet:x"])
    assert code == 2
    assert capsys.readouterr().err == (
        "assetcast: error: --dataset: expected lerobot:DIR or robomimic:FILE, got 'parquet:x'\n"
    )


def test_cli_refuses_a_live_builder_that_does_not_exist(
    collected: CollectedRun, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASSETCAST_LIVE_BUILDER", "fork")
    versions = collected.store().state(collected.run_id).version
    code = main(["--db", collected.db_url, "collect", collected.run_id,
                 "--dataset", f"lerobot:{tmp_path / 'd'}"])
    assert code == 2
    assert capsys.readouterr().err == (
        "assetcast: error: ASSETCAST_LIVE_BUILDER must be one of process, thread, not 'fork'\n"
    )
    assert not (tmp_path / "d").exists()
    assert collected.store().state(collected.run_id).version == versions


def _with_later_episodes_altered(source, alter):  # type: ignore[no-untyped-def]
    """``source`` whose episodes of its last batch load as ``alter(data)`` gives."""
    import dataclasses

    last_batch = source.episodes[-1].provenance.batch_index
    real_load = source.load

    def load(episode):  # type: ignore[no-untyped-def]
        data = real_load(episode)
        return alter(data) if episode.provenance.batch_index == last_batch else data

    altered = dataclasses.replace(source)
    object.__setattr__(altered, "load", load)
    return altered


@pytest.mark.parametrize("change", ["columns", "rate"])
def test_a_later_batch_with_another_layout_is_refused_as_a_whole_check_refuses_it(
    collected: CollectedRun, tmp_path: Path, change: str
) -> None:
    """The export checks the layout batch by batch while files are being written; a later
    batch that differs gives the error the check of every episode at once gives, and
    nothing is published."""
    import dataclasses

    import numpy as np

    from runtime.export.dataset import build_version
    from runtime.export.episodes import read_source
    from runtime.export.features import camera_layout, common_columns, control_fps

    def alter(data):  # type: ignore[no-untyped-def]
        arrays = dict(data.arrays)
        if change == "columns":
            arrays.pop("robot_qvel")
        else:
            arrays["timestamps"] = np.asarray(arrays["timestamps"]) * 2.0
        return dataclasses.replace(data, arrays=arrays,
                                   metadata={k: v for k, v in data.metadata.items() if k != "fps"})

    source = _with_later_episodes_altered(read_source(collected.store(), [collected.run_id]),
                                          alter)
    named = [(f"run {e.provenance.run_id} batch {e.provenance.batch_index} episode "
              f"{e.provenance.episode_index}", source.load(e)) for e in source.episodes]
    with pytest.raises(TaskMismatch) as whole:
        common_columns(named)
        camera_layout(named)
        control_fps(named)
    out = tmp_path / "d"
    with pytest.raises(TaskMismatch) as export:
        build_version(DatasetSpec("lerobot", out), source)
    assert str(export.value) == str(whole.value)
    assert not out.exists() and not (tmp_path / ".d.assetcast").exists()
