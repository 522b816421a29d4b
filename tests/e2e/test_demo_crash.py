"""SIGKILL a collecting `assetcast run`, read the crash with forensics, resume, verify."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.assets.demo_catalog import write_demo_catalog
from runtime.cli import main
from runtime.demo import demo_task_text
from store import EventStore
from store.projections.forensics import forensics

REPO = Path(__file__).resolve().parents[2]
EPISODES = 12


def _committed(store: EventStore, run_id: str) -> int:
    return sum(e.type == "TrajectoryCommitted" for e in store.read(run_id))


def test_killed_run_is_explained_then_resumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = tmp_path / "catalog"
    write_demo_catalog(catalog)
    task = tmp_path / "task.yaml"
    task.write_text(demo_task_text(), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'assetcast.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime", "--log-level", "error", "run", str(task),
         "--catalog", f"item={catalog}", "--catalog", f"bin={catalog}", "--out",
         str(tmp_path / "out"), "--seed", "10", "--episodes-per-batch", str(EPISODES),
         "--no-progress", "--db", url],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    store = EventStore(url)
    deadline = time.monotonic() + 120
    run_id = None
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            runs = store.list_runs()
            if runs and _committed(store, runs[0].run_id) >= 3:
                run_id = runs[0].run_id
                break
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert run_id is not None, proc.stderr.read() if proc.stderr else ""
    proc.stderr.close()

    chain = store.verify_chain(run_id)  # the crash left a prefix whose chain verifies
    assert chain.ok, chain.summary()
    report = forensics(store.read(run_id))
    assert report["state"] == "collecting"
    [session] = report["open_collection_sessions"]
    assert session["environment_built"] and session["environment_closed"] is None
    assert session["crashed"] and session["pid"] == proc.pid
    assert report["failure"] is None

    capsys.readouterr()
    assert main(["forensics", run_id, "--db", url]) == 0
    text = capsys.readouterr().out
    assert f"session {session['session_id']} (collection, pid {proc.pid}" in text
    assert "environment NOT closed" in text

    assert main(["resume", run_id, "--db", url, "--no-progress", "--log-level", "error"]) == 0
    assert f"run {run_id}: " in capsys.readouterr().out
    assert main(["forensics", run_id, "--json", "--db", url]) == 0
    after = json.loads(capsys.readouterr().out)
    assert after["state"] == "completed"
    assert len(after["resumes"]) == 1 and after["interrupted_episode"] is None
    assert main(["verify", run_id, "--head", chain.head, "--db", url]) == 0  # old head: a prefix
    verified = capsys.readouterr().out
    assert f"; {_committed(store, run_id)} trajectories" in verified
    assert f"note: the noted head is seq {chain.events};" in verified
    assert _committed(store, run_id) == EPISODES
