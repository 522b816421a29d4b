"""SIGKILL a session right after its last event and before its report: resume rewrites it.

The window is small (RunCompleted is appended, then `report.json` is written), so a random
kill rarely lands in it; here the child kills itself with SIGKILL at the exact moment, from
inside the report writer, which leaves on disk what such a kill leaves. ``assetcast resume``
must then rewrite the report from the log (exit 0, nothing appended) and, once it matches,
say there is nothing to resume (exit 2).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import runtime.collection.session_run as session_run
import runtime.preparation.session_outcome as session_outcome
from runtime.collection import collect
from runtime.collection.demo_run import prepare_demo_run
from store import EventStore


def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


_, repo, url, catalog, out, phase = sys.argv
store = EventStore(url)
if phase == "prepare":
    session_outcome.write_report = die
    prepare_demo_run(store, out, catalog, seed=7, batches=1, episodes_per_batch=2,
                     settle_steps=10, cameras=False, run_id="run-killed-before-report")
else:
    session_run.write_report = die
    collect("run-killed-before-report", store=store, progress=False)
"""


def _child(tmp_path: Path, url: str, catalog: Path, out: Path, phase: str) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script), str(REPO), url, str(catalog), str(out), phase],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "runtime", "--log-level", "error", *argv],
        capture_output=True, text=True, timeout=300, env=env,
    )


def test_kills_between_the_last_event_and_the_report_are_repaired_by_resume(
    tmp_path: Path,
) -> None:
    from runtime.collection.demo_run import write_catalog
    from runtime.files import report_text
    from store import EventStore
    from store.projections.collection_report import collection_report
    from store.projections.preparation_report import preparation_report

    url = f"sqlite:///{tmp_path / 'k.db'}"
    catalog, out = write_catalog(tmp_path / "catalog"), tmp_path / "out"
    run_id = "run-killed-before-report"
    store = EventStore(url)

    _child(tmp_path, url, catalog, out, "prepare")
    assert store.state(run_id).state == "prepared"
    assert not (out / "preparation.report.json").exists()
    _child(tmp_path, url, catalog, out, "collect")
    events = store.read(run_id)
    assert store.state(run_id).state == "completed"
    assert not (out / "report.json").exists()
    # The collecting session already rewrote the preparation report the first kill left out.
    assert (out / "preparation.report.json").read_text(encoding="utf-8") == report_text(
        preparation_report(events)
    )

    resumed = _cli("resume", run_id, "--db", url, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    report = out / "report.json"
    assert resumed.stdout == (
        f"run {run_id}: rewrote {report} from the log (a kill had left it stale)\n"
    )
    assert report.read_text(encoding="utf-8") == report_text(collection_report(events))
    assert store.read(run_id) == events

    again = _cli("resume", run_id, "--db", url, "--no-progress")
    assert again.returncode == 2
    assert again.stderr.strip().endswith(f"run {run_id} is already completed")
