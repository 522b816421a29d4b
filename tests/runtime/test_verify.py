"""verify: every logged trajectory and deployment is re-checked against the files on disk."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from domain.config import CollectionConfig
from runtime.assets.demo_catalog import write_demo_catalog
from runtime.collection import collect
from runtime.collection.demo_run import gantry_demo_task_text as demo_task_text
from runtime.prepare import prepare, providers_from_catalog_args
from runtime.verify import verify_events
from store.memory import InMemoryEventStore


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list, Path]:
    base = tmp_path_factory.mktemp("verify")
    catalog = base / "catalog"
    write_demo_catalog(catalog)
    task = base / "task.yaml"
    task.write_text(demo_task_text(), encoding="utf-8")
    store = InMemoryEventStore()
    providers = providers_from_catalog_args([f"item={catalog}", f"bin={catalog}"])
    cfg = CollectionConfig(seed=10, max_batches=1, episodes_per_batch=2)
    result = prepare(task, providers, cfg=cfg, output_dir=base / "out", store=store, goal="run")
    collect(result.run_id, store=store, progress=False)
    return store.read(result.run_id), base / "out"


@pytest.fixture()
def pristine(run: tuple[list, Path], tmp_path: Path):
    """Each test tampers with its own copy; paths in the log are relative to output_dir."""
    events, out = run
    backup = tmp_path / "backup"
    shutil.copytree(out, backup)
    yield events, out
    shutil.rmtree(out)
    shutil.copytree(backup, out)


def test_untouched_run_verifies(pristine: tuple[list, Path]) -> None:
    events, _ = pristine
    result = verify_events("r", events)
    assert result.ok, result.problems
    assert (result.trajectories_checked, result.deployments_checked) == (2, 1)
    prepared = {e.payload["content_sha256"] for e in events if e.type == "CandidatePrepared"}
    assert result.snapshots_checked == len(prepared) > 0


def test_missing_and_truncated_trajectories(pristine: tuple[list, Path]) -> None:
    events, out = pristine
    first, second = sorted((out / "recordings").rglob("*.pt"))
    first.unlink()
    second.write_bytes(second.read_bytes()[:-10])
    problems = verify_events("r", events).problems
    assert problems == [
        f"batch 0 episode 0: trajectory {first} is missing",
        f"batch 0 episode 1: trajectory {second} has {second.stat().st_size} bytes, "
        f"the log says {second.stat().st_size + 10}",
    ]


def test_modified_deployment_is_reported(pristine: tuple[list, Path]) -> None:
    events, out = pristine
    task = out / "batch_0000" / "task.yaml"
    task.write_text(task.read_text() + "\n# edited\n")
    [problem] = verify_events("r", events).problems
    assert problem == f"batch 0: {task.resolve()}: SHA-256 differs from the manifest"


def test_replaced_manifest_is_reported(pristine: tuple[list, Path]) -> None:
    events, out = pristine
    manifest = out / "batch_0000" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"schema_version"', ' "schema_version"'))
    [problem] = verify_events("r", events).problems
    assert problem.startswith(f"batch 0: {manifest.resolve()}: manifest digest ")
    assert "differs from the recorded" in problem


def test_changed_cache_snapshot_file_is_named(pristine: tuple[list, Path]) -> None:
    events, out = pristine
    # The first prepared snapshot whose mesh is an OBJ (listing order is the seed's sample).
    sha, mesh = next(
        (e.payload["content_sha256"], objs[0])
        for e in events if e.type == "CandidatePrepared"
        if (objs := sorted(
            p for p in (out / "cache" / e.payload["content_sha256"]).iterdir()
            if p.suffix == ".obj"
        ))
    )
    mesh.write_bytes(mesh.read_bytes() + b"\n")
    problems = verify_events("r", events).problems
    assert problems == [
        f"cache snapshot {sha[:12]}: {mesh}: content does not match its recorded SHA-256"
    ]


def test_cache_edit_with_consistent_snapshot_json_is_caught_by_the_deployment_copy(
    pristine: tuple[list, Path],
) -> None:
    """Rewrite a derived collision piece and its digest in snapshot.json (which
    content_sha256 does not cover): the chained deployment manifest still tells."""
    import json

    from domain.canonical import canonical_json
    from runtime.files import file_sha256

    events, out = pristine
    deployed = {
        e.payload["assets"][role]["content_sha256"]
        for e in events if e.type == "BatchResolved" for role in e.payload["assets"]
    }
    sha = sorted(deployed)[0]
    folder = out / "cache" / sha
    meta_path = folder / ".assetcast" / "snapshot.json"
    meta = json.loads(meta_path.read_text())
    piece_rel = sorted(meta["derived_files"])[0]
    piece = folder / piece_rel
    piece.write_bytes(piece.read_bytes() + b"# forged\n")
    meta["derived_files"][piece_rel] = file_sha256(piece)
    meta_path.write_text(canonical_json(meta))
    problems = verify_events("r", events).problems
    assert problems == [
        f"cache snapshot {sha[:12]}: {piece} differs from the copy its deployment manifest "
        "records"
    ]


def test_a_forged_receipt_pointing_at_another_episodes_file_fails(
    pristine: tuple[list, Path],
) -> None:
    """The forgery copies episode 0's receipt (path, bytes, SHA-256) into episode 1's: the
    file checks alone would pass twice over one file."""
    events, _ = pristine
    receipts = [e for e in events if e.type == "TrajectoryCommitted"]
    first, second = receipts
    forged_payload = {**first.payload, "episode_index": second.payload["episode_index"]}
    forged = [replace(e, payload=forged_payload) if e is second else e for e in events]
    result = verify_events("r", forged)
    path = first.payload["path"]
    assert result.problems == [
        f"batch 0 episode 1: committed path {path} is not this episode's file (b0000_e0001.pt)",
        f"batch 0 episode 1: committed path {path} is already the trajectory of batch 0 "
        "episode 0",
    ]
    assert result.trajectories_checked == 1  # one file, counted once


def test_a_receipt_outside_its_sessions_folder_fails(pristine: tuple[list, Path]) -> None:
    events, out = pristine
    receipt = next(e for e in events if e.type == "TrajectoryCommitted")
    moved = f"elsewhere/{Path(receipt.payload['path']).name}"
    (out / "elsewhere").mkdir()
    shutil.copy(out / receipt.payload["path"], out / moved)
    forged = [
        replace(e, payload={**e.payload, "path": moved}) if e is receipt else e for e in events
    ]
    problem, *camera_files = verify_events("r", forged).problems
    assert problem.startswith(f"batch 0 episode 0: committed path {moved} is outside the "
                              "recording folder recordings/run_")
    # The episode's camera files stayed where they were: no longer beside its trajectory.
    assert len(camera_files) == len(receipt.payload["files"])
    assert all(p.endswith("is not beside this episode's trajectory") for p in camera_files)


def test_a_log_that_does_not_fold_fails(pristine: tuple[list, Path]) -> None:
    events, _ = pristine
    judged = next(i for i, e in enumerate(events) if e.type == "EpisodeJudged")
    broken = events[:judged] + events[judged + 1:]  # an episode without its verdict
    problems = verify_events("r", broken).problems
    assert problems[0].startswith(f"log: seq {events[judged].seq + 1} ")
    assert "does not fold" in problems[0]
