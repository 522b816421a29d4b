"""Ray workers' folders: a folder whose worker was SIGKILLed is removed by the next sweep,
a live worker's folder never is; an address where nothing listens is refused at once.
(No Ray is started here: the homes are made by plain child processes.)"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.collection.executors import worker_homes
from runtime.collection.executors.ray_connection import RayUnavailable, connect
from runtime.collection.executors.worker_homes import (
    WorkerHome,
    remove_abandoned,
    remove_session_homes,
)

REPO = Path(__file__).resolve().parents[3]
HOLD = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from runtime.collection.executors.worker_homes import WorkerHome\n"
    "home = WorkerHome('stest', 'ray-0', root=Path(sys.argv[1]))\n"
    "(home.path / 'deployments').mkdir()\n"
    "print(home.path, flush=True)\n"
    "time.sleep(600)\n"
)


def _age(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


def test_a_sigkilled_workers_folder_is_removed_and_a_live_ones_is_kept(
    tmp_path: Path,
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        held = Path(holder.stdout.readline().strip())
        _age(held, 3600)
        assert remove_abandoned(tmp_path) == [] and held.is_dir()  # alive: kept
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        assert held.is_dir()  # SIGKILL left it behind
        assert remove_abandoned(tmp_path) == [held]
        assert not held.exists()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_a_new_worker_home_sweeps_abandoned_folders_but_not_young_or_locked_ones(
    tmp_path: Path,
) -> None:
    stale = tmp_path / "sold-ray-1-abc"
    (stale / "deployments").mkdir(parents=True)
    _age(stale, 3600)  # unlocked and old: its worker is gone
    young = tmp_path / "sold-ray-2-def"
    young.mkdir()  # unlocked but just made: maybe a worker being born
    home = WorkerHome("snew", "ray-0", root=tmp_path)
    try:
        assert not stale.exists() and young.is_dir()
        assert home.path.is_dir() and home.path.name.startswith("snew-ray-0-")
        _age(home.path, 3600)
        assert remove_abandoned(tmp_path) == []  # locked by this live object
    finally:
        home.remove()
    assert not home.path.exists()


def test_the_driver_removes_its_own_sessions_folders_only(tmp_path: Path) -> None:
    mine = [tmp_path / "smine-ray-0-a", tmp_path / "smine-ray-1.1-b"]
    other = tmp_path / "sother-ray-0-c"
    for folder in (*mine, other):
        folder.mkdir()
    assert sorted(remove_session_homes("smine", tmp_path)) == sorted(mine)
    assert other.is_dir() and not any(p.exists() for p in mine)


def test_the_default_root_is_one_folder_in_the_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_homes.tempfile, "tempdir", str(tmp_path))
    assert worker_homes.homes_root() == tmp_path / "assetcast-ray-workers"


def test_an_address_where_nothing_listens_is_refused_at_once_without_starting_ray() -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pytest.importorskip("ray")
    started = time.monotonic()
    with pytest.raises(RayUnavailable) as caught:
        connect(1, f"127.0.0.1:{port}")
    assert str(caught.value) == (
        f"--ray-address 127.0.0.1:{port}: no Ray cluster could be joined there "
        "(nothing answers: ConnectionRefusedError: [Errno 111] Connection refused)"
    )
    assert time.monotonic() - started < 30
    import ray

    assert not ray.is_initialized()
