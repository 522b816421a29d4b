"""Collection on Ray workers: the same accepted set and file hashes as one in-process worker,
whatever dies (workers SIGKILLed mid-episode, the driver SIGKILLed), and a worker refusing
a deployment whose bytes differ from their digests. Runs only inside a loopback-only
network namespace (see tests/executors/test_ray_in_namespace.py)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from runtime.collection import collect
from runtime.collection.deployment_transfer import DeploymentDigestMismatch
from runtime.resume import resume
from tests.executors.ray_inner.conftest import (
    assert_logged_once_and_legal,
    prepared_run,
    results,
    workers_of,
)

REPO = Path(__file__).resolve().parents[3]
EPISODE_TITLE = "ray::_ActorBody.episode"  # Ray's process title while an actor runs episode()


def _open_batches_overlap(store: Any, run_id: str) -> bool:
    """Whether some batch started while another was still unfinished (batches in flight)."""
    open_now: set[int] = set()
    for event in store.read(run_id):
        b = event.payload.get("batch_index")
        if event.type == "BatchStarted":
            if open_now - {b}:
                return True
            open_now.add(b)
        elif event.type == "BatchFinished":
            open_now.discard(b)
    return False


def test_two_workers_collect_exactly_what_one_worker_collects(
    ray_local: str, reference: dict, catalog: Path, tmp_path: Path
) -> None:
    store, run_id, out = prepared_run(tmp_path, catalog)
    result = collect(run_id, store=store, progress=False, workers=2)
    assert results(store, run_id) == reference
    assert result.accepted == sum(accepted for accepted, _ in reference.values())
    assert workers_of(store, run_id) == {"ray-0", "ray-1"}
    assert _open_batches_overlap(store, run_id)  # two batches really were in flight
    assert_logged_once_and_legal(store, run_id, out)
    built = [e.payload for e in store.read(run_id) if e.type == "EnvironmentBuilt"]
    assert sorted(p["worker"] for p in built) == ["ray-0", "ray-1"]  # ONE env per worker


def test_workers_render_cameras_in_fresh_processes_byte_for_byte(
    ray_local: str, catalog: Path, tmp_path: Path
) -> None:
    """Cameras render inside the actors (fresh processes, no inherited GL context); their
    videos, depth and segmentation files come back as bytes identical to an in-process run."""
    small = {"cameras": True, "batches": 2, "episodes": 1}
    ref_store, ref_id, _ = prepared_run(tmp_path / "local", catalog, **small)
    collect(ref_id, store=ref_store, progress=False)
    store, run_id, out = prepared_run(tmp_path / "ray", catalog, **small)
    collect(run_id, store=store, progress=False, workers=2)
    expected = results(ref_store, ref_id)
    assert results(store, run_id) == expected
    assert any(len(hashes) > 1 for _, hashes in expected.values())  # camera files compared
    assert_logged_once_and_legal(store, run_id, out)


def _actor_episode_pids() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            title = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if title.decode(errors="replace").startswith(EPISODE_TITLE):
            pids.append(int(entry))
    return pids


class _Killer(threading.Thread):
    """SIGKILLs a worker process that is running an episode, ``kills`` times, each at a
    random moment after the log has made progress since the previous kill."""

    def __init__(self, url: str, run_id: str, kills: int, seed: int) -> None:
        super().__init__(daemon=True)
        from store.event_store import EventStore

        self.store = EventStore(url)
        self.run_id, self.wanted, self.rng = run_id, kills, random.Random(seed)
        self.killed: list[int] = []
        self.homes: list[Path] = []  # the killed workers' working folders
        self.stop = threading.Event()

    def done_episodes(self) -> int:
        return self.store.state(self.run_id).episodes_done

    def run(self) -> None:
        seen = -1
        while len(self.killed) < self.wanted and not self.stop.is_set():
            done = self.done_episodes()
            if done <= seen:
                time.sleep(0.05)
                continue
            time.sleep(self.rng.uniform(0.0, 0.4))
            pids = [p for p in _actor_episode_pids() if p not in self.killed]
            if not pids:
                time.sleep(0.05)
                continue
            victim = self.rng.choice(pids)
            try:
                home = Path(os.readlink(f"/proc/{victim}/cwd"))
                os.kill(victim, signal.SIGKILL)
            except (ProcessLookupError, FileNotFoundError):
                continue
            self.killed.append(victim)
            self.homes.append(home)
            seen = self.done_episodes()


def test_workers_sigkilled_mid_episode_lose_nothing_and_log_each_episode_once(
    ray_local: str, catalog: Path, tmp_path: Path
) -> None:
    # Longer batches than the shared reference: room for 5 kills with progress between them.
    longer = {"batches": 3, "episodes": 6}
    ref_store, ref_id, _ = prepared_run(tmp_path / "local", catalog, **longer)
    collect(ref_id, store=ref_store, progress=False)
    reference = results(ref_store, ref_id)
    store, run_id, out = prepared_run(tmp_path / "ray", catalog, **longer)
    url = f"sqlite:///{tmp_path / 'ray' / 'ledger.db'}"
    killer = _Killer(url, run_id, kills=5, seed=20261201)
    killer.start()
    try:
        collect(run_id, store=store, progress=False, workers=2)
    finally:
        killer.stop.set()
        killer.join(timeout=30)
    assert len(killer.killed) >= 5, f"only {len(killer.killed)} kills landed"
    assert results(store, run_id) == reference
    assert_logged_once_and_legal(store, run_id, out)
    replacements = {w for w in workers_of(store, run_id) if "." in w}
    assert replacements, "no batch was re-dispatched to a fresh worker"
    # The killed workers could not remove their folders; nothing of them is left behind.
    assert killer.homes and all(h.name.startswith("s") for h in killer.homes), killer.homes
    assert [h for h in killer.homes if h.exists()] == []


def test_a_sigkilled_driver_is_resumed_on_two_workers_identically(
    ray_local: str, reference: dict, catalog: Path, tmp_path: Path
) -> None:
    store, run_id, out = prepared_run(tmp_path, catalog)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    log = (tmp_path / "driver.log").open("wb")
    driver = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "collect", run_id, "--db", url, "--workers", "2",
         "--ray-address", ray_local, "--no-progress", "--log-level", "warning"],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while store.state(run_id).episodes_done < 4:
            assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the driver made no progress"
            time.sleep(0.05)
        os.kill(driver.pid, signal.SIGKILL)
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.wait()
        log.close()
    state = store.state(run_id)
    assert state.state == "collecting" and state.episodes_done < len(reference)
    result = resume(run_id, store=store, progress=False, workers=2)
    assert result.accepted == sum(accepted for accepted, _ in reference.values())
    assert results(store, run_id) == reference
    assert_logged_once_and_legal(store, run_id, out)


def test_a_worker_refuses_a_deployment_whose_bytes_differ_and_the_run_resumes(
    ray_local: str, reference: dict, catalog: Path, tmp_path: Path
) -> None:
    store, run_id, out = prepared_run(tmp_path, catalog)
    batch = store.state(run_id).batches[1].deployment
    root = out / batch["deployment_path"]
    import json

    listed = json.loads((root / "manifest.json").read_text())["files"]
    rel = sorted(r for r in listed if r.endswith(".obj"))[0]
    original = (root / rel).read_bytes()
    (root / rel).write_bytes(original + b"\n# altered after preparation\n")
    with pytest.raises(DeploymentDigestMismatch, match=rf"deployment of batch 1: {rel} has SHA"):
        collect(run_id, store=store, progress=False, workers=2)
    failed = [e.payload for e in store.read(run_id) if e.type == "RunFailed"][-1]
    assert (failed["phase"], failed["error_type"], failed["batch_index"]) == (
        "validate_deployment", "DeploymentDigestMismatch", 1,
    )
    assert store.state(run_id).state == "failed"
    (root / rel).write_bytes(original)
    resume(run_id, store=store, progress=False, workers=2)
    assert results(store, run_id) == reference
    assert store.state(run_id).state == "completed"
