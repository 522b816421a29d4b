"""`forensics` after a real SIGKILL names the episode the dead collector was running, and
after a real Ctrl-C (SIGINT) says in one line where it stopped, with no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli_logging import reset_cli_logging  # noqa: F401

REPO = Path(__file__).resolve().parents[2]


def _collector(db_url: str, run_id: str, workdir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return subprocess.Popen(
        [sys.executable, "-m", "runtime", "--log-level", "warning", "collect", run_id,
         "--db", db_url, "--no-progress"],
        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _done(store: Any, run_id: str) -> set[tuple[int, int]]:
    return {
        (e.payload["batch_index"], e.payload["episode_index"])
        for e in store.read(run_id)
        if e.type in ("TrajectoryCommitted", "TrajectoryDiscarded")
    }


def _run_until_an_episode_is_done(tmp_path: Path) -> tuple[Any, str, str, subprocess.Popen[str]]:
    from runtime.collection.demo_run import prepare_demo_run, write_catalog
    from store import EventStore

    db_url = f"sqlite:///{tmp_path / 'f.db'}"
    store = EventStore(db_url)
    run_id = prepare_demo_run(
        store, tmp_path / "out", write_catalog(tmp_path / "catalog"), seed=7, batches=2,
        episodes_per_batch=4, settle_steps=10, cameras=False,
    )
    proc = _collector(db_url, run_id, tmp_path)
    deadline = time.monotonic() + 240
    while not _done(store, run_id):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no episode was done in time"
        time.sleep(0.05)
    return store, db_url, run_id, proc


def _forensics(db_url: str, run_id: str, capsys: pytest.CaptureFixture[str]) -> str:
    from runtime.cli import main

    capsys.readouterr()
    assert main(["forensics", run_id, "--db", db_url]) == 0
    return capsys.readouterr().out


@pytest.mark.timeout(600)
def test_sigkill_forensics_names_the_in_flight_episode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, db_url, run_id, proc = _run_until_an_episode_is_done(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    done = _done(store, run_id)
    expected = min((b, e) for b in range(2) for e in range(4) if (b, e) not in done)
    session = next(e.payload for e in store.read(run_id) if e.type == "CollectionStarted")
    out = _forensics(db_url, run_id, capsys)
    assert (
        f"in-flight episode: batch {expected[0]} episode {expected[1]} (session "
        f"{session['session_id']} died running it; the log holds nothing of an episode until "
        "it is done)"
    ) in out.splitlines()
    assert "running or crashed; environment NOT closed" in out
    assert "Traceback" not in out


@pytest.mark.timeout(600)
def test_ctrl_c_is_one_line_with_phase_and_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, db_url, run_id, proc = _run_until_an_episode_is_done(tmp_path)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    failed = [e for e in store.read(run_id) if e.type == "RunFailed"][-1]
    p = failed.payload
    assert p["error_type"] == "KeyboardInterrupt"
    out = _forensics(db_url, run_id, capsys)
    where = (
        f" at batch {p['batch_index']} episode {p['episode_index']}"
        if p["batch_index"] is not None else ""
    )
    assert (
        f"interrupted (Ctrl-C) #{failed.seq} in {p['phase']}{where}; continue with: "
        f"assetcast resume {run_id}"
    ) in out.splitlines()
    assert "Traceback" not in out and "KeyboardInterrupt" not in out
    assert "in-flight episode" not in out  # it ended with a word: nothing to infer
