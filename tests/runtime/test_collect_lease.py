"""Two processes, one run: the second `collect`/`resume` is refused while the first is alive."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from domain.errors import LeaseHeld
from runtime.collection import collect
from runtime.collection.demo_run import prepare_demo_run, write_catalog
from runtime.resume import resume
from store import EventStore

REPO = Path(__file__).resolve().parents[2]

HOLDER = """
import sys, time
from pathlib import Path
from runtime.logging import configure_logging
configure_logging(level="warning")
from runtime.collection import collect, default_environment_factory
from store import EventStore

db, run_id, ready, go = sys.argv[1:5]

def factory(deployment_dir, *, seed, settle_steps):
    Path(ready).write_text("holding")
    deadline = time.time() + 60
    while not Path(go).exists() and time.time() < deadline:
        time.sleep(0.05)
    return default_environment_factory(deployment_dir, seed=seed, settle_steps=settle_steps)

collect(run_id, store=EventStore(db), environment_factory=factory, progress=False)
"""


def test_second_session_is_refused_while_the_first_is_alive(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'lease.db'}"
    store = EventStore(db)
    catalog = write_catalog(tmp_path / "catalog")
    run_id = prepare_demo_run(
        store, tmp_path / "out", catalog, batches=1, episodes_per_batch=1, settle_steps=5
    )
    ready, go = tmp_path / "ready", tmp_path / "go"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, db, run_id, str(ready), str(go)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 60
        while not ready.exists():
            assert holder.poll() is None, holder.communicate()[1]
            assert time.time() < deadline, "holder never reached its environment factory"
            time.sleep(0.05)
        holder_pid = rf"pid {holder.pid} on host"
        with pytest.raises(LeaseHeld, match=rf"run '{run_id}' is held by owner '[0-9a-f]{{12}}' "
                                            rf"\({holder_pid}"):
            collect(run_id, store=store, progress=False)
        with pytest.raises(LeaseHeld, match=holder_pid):
            resume(run_id, store=store, progress=False)
        go.write_text("go")
        _, err = holder.communicate(timeout=120)
        assert holder.returncode == 0, err[-3000:]
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert store.state(run_id).state == "completed"
    owners = {e.payload["session_id"] for e in store.read(run_id) if e.type == "CollectionStarted"}
    assert len(owners) == 1  # the refused sessions appended nothing
