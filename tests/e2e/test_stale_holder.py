"""A lease must fence its holder: SIGSTOP a preparer or a collector past its lease, resume
the run in another process, SIGCONT the first -- it must publish nothing.

The child (tests/e2e/stale_worker.py) runs with a short lease (TTL 3 s, heartbeat 0.5 s)
and pauses at a chosen point: right before publishing a cache snapshot, a deployment or a
trajectory, between a trajectory's rename and its confirming check, or right before an
append. The parent stops it there with SIGSTOP, waits past
the TTL, resumes the run itself (taking the lease over, which moves the fencing token),
records the log and every file of the output folder, and then lets the stopped process
continue. The stale process must stop with ``LeaseLost`` (a ``SessionLost``) and leave the
log and every published file exactly as the resumed run left them (its own temporary file
or folder it removes itself). The resumed run must equal an uninterrupted run, and the
cache must hold only snapshots that verify.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from domain.config import CollectionConfig
from runtime.assets.snapshot import read_snapshot, verify_prepared_asset
from runtime.collection.demo_run import demo_task_path, prepare_demo_run, write_catalog
from runtime.files import file_sha256
from runtime.prepare import prepare, providers_from_catalog_args, resume_preparation
from runtime.resume import resume
from store import EventStore
from tests.runtime.trajectory_content import content_digest

REPO = Path(__file__).resolve().parents[2]
TTL_S, HEARTBEAT_S = 3.0, 0.5
PAST_THE_LEASE_S = TTL_S + 1.5
TEMP_MARKS = (".tmp-", ".partial-", ".tmp")


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ, "PYTHONPATH": str(REPO),
        "ASSETCAST_LEASE_TTL_S": str(TTL_S), "ASSETCAST_LEASE_HEARTBEAT_S": str(HEARTBEAT_S),
    }
    with open(log, "wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.stale_worker", *args], cwd=REPO, env=env,
            stdout=sink, stderr=subprocess.STDOUT,
        )


def _stop_at_marker(child: subprocess.Popen[bytes], marker: Path, log: Path) -> None:
    deadline = time.monotonic() + 180
    while not marker.exists():
        assert child.poll() is None, f"child ended before its pause:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "child never reached its pause"
        time.sleep(0.005)
    os.kill(child.pid, signal.SIGSTOP)


def _is_temp(path: Path) -> bool:
    return any(mark in part for part in path.parts for mark in TEMP_MARKS)


def _published(root: Path) -> dict[str, str]:
    """Every non-temporary file below ``root`` with its SHA-256."""
    return {
        p.relative_to(root).as_posix(): file_sha256(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not _is_temp(p.relative_to(root))
    }


def _continue_and_expect_lost(child: subprocess.Popen[bytes], log: Path) -> None:
    os.kill(child.pid, signal.SIGCONT)
    assert child.wait(120) != 0, log.read_text()[-3000:]
    assert "LeaseLost" in log.read_text(), log.read_text()[-3000:]


def _log_rows(store: EventStore, run_id: str) -> list[tuple[int, str]]:
    return [(e.seq, e.type) for e in store.read(run_id)]


def _cache_verifies(cache: Path) -> None:
    leftovers = [p.name for p in cache.iterdir() if p.name.startswith(".")]
    assert leftovers == [], leftovers
    for folder in sorted(cache.iterdir()):
        verify_prepared_asset(read_snapshot(folder))


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_catalog(tmp_path_factory.mktemp("stale") / "catalog")


@pytest.fixture(scope="module")
def clean_preparation(
    catalog: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[str], list[bytes]]:
    out = tmp_path_factory.mktemp("clean") / "out"
    providers = providers_from_catalog_args([f"item={catalog}", f"bin={catalog}"])
    result = prepare(
        demo_task_path(), providers, cfg=CollectionConfig(seed=11, max_batches=2),
        output_dir=out, store=EventStore(f"sqlite:///{out.parent / 'clean.db'}"),
    )
    return (
        [d.asset_set_id for d in result.deployments],
        [(d.path / "manifest.json").read_bytes() for d in result.deployments],
    )


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "pause",
    ["check:_publish:2", "check:materialize_deployment:1", "append:6"],
    ids=["before-snapshot-publish", "before-deployment-publish", "before-append"],
)
def test_a_stopped_preparer_publishes_nothing_after_takeover(
    pause: str, catalog: Path, clean_preparation: tuple[list[str], list[bytes]], tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    out, marker, log = tmp_path / "out", tmp_path / "paused", tmp_path / "child.log"
    run_id = "run-20260101-000000-5ta1e0"
    child = _spawn(["prepare", db, str(catalog), str(out), run_id, pause, str(marker)], log)
    try:
        _stop_at_marker(child, marker, log)
        time.sleep(PAST_THE_LEASE_S)
        store = EventStore(db)
        result = resume_preparation(run_id, store=store)
        expected_ids, expected_manifests = clean_preparation
        assert [d.asset_set_id for d in result.deployments] == expected_ids
        assert [(d.path / "manifest.json").read_bytes() for d in result.deployments] == (
            expected_manifests
        )
        rows, files = _log_rows(store, run_id), _published(out)
        _continue_and_expect_lost(child, log)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
    assert _log_rows(store, run_id) == rows  # not one event after the takeover
    assert _published(out) == files  # no snapshot, deployment or report
    assert [p for p in out.rglob("*") if _is_temp(p.relative_to(out))] == []
    _cache_verifies(out / "cache")
    assert store.state(run_id).state == "prepared"


@pytest.fixture(scope="module")
def reference_collection(
    catalog: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[int, int], str]:
    base = tmp_path_factory.mktemp("reference")
    store = EventStore(f"sqlite:///{base / 'ref.db'}")
    run_id = prepare_demo_run(store, base / "out", catalog, batches=2, episodes_per_batch=2)
    from runtime.collection import collect

    collect(run_id, store=store, progress=False)
    return _commits(store, run_id, base / "out")


def _commits(store: EventStore, run_id: str, out: Path) -> dict[tuple[int, int], str]:
    """Each committed episode's trajectory content (its metadata names its run, so two runs'
    files differ in that field alone; the rest must be equal)."""
    commits: dict[tuple[int, int], str] = {}
    for event in store.read(run_id):
        if event.type == "TrajectoryCommitted":
            key = (event.payload["batch_index"], event.payload["episode_index"])
            assert key not in commits, f"{key} committed twice"
            commits[key] = content_digest(out / event.payload["path"])
    return commits


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "pause",
    ["check:write_stream_atomic:1", "check:write_stream_atomic:2", "check:write_stream_atomic:5",
     "append:3"],
    ids=["before-first-trajectory", "after-first-trajectory-rename",
         "before-a-later-publish", "before-append"],
)
def test_a_stopped_collector_publishes_nothing_after_takeover(
    pause: str, catalog: Path, reference_collection: dict[tuple[int, int], Any],
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    out, marker, log = tmp_path / "out", tmp_path / "paused", tmp_path / "child.log"
    store = EventStore(db)
    run_id = prepare_demo_run(store, out, catalog, batches=2, episodes_per_batch=2)
    child = _spawn(["collect", db, run_id, pause, str(marker)], log)
    try:
        _stop_at_marker(child, marker, log)
        time.sleep(PAST_THE_LEASE_S)
        resume(run_id, store=store, progress=False)
        assert _commits(store, run_id, out) == reference_collection
        rows, files = _log_rows(store, run_id), _published(out)
        _continue_and_expect_lost(child, log)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
    assert _log_rows(store, run_id) == rows  # not one event after the takeover
    assert _published(out) == files  # no trajectory, no report
    commits = [e.payload for e in store.read(run_id) if e.type == "TrajectoryCommitted"]
    recorded = {(out / p["path"]).resolve() for p in commits} | {
        (out / f["path"]).resolve() for p in commits for f in p.get("files", ())
    }
    on_disk = {p.resolve() for p in (out / "recordings").rglob("*") if p.is_file()}
    # recordings/** holds exactly the logged trajectories and their camera files
    assert on_disk == recorded
    assert store.state(run_id).state == "completed"
