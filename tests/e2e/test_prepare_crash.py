"""SIGKILL a real preparation at random instants, resume it, and compare with a clean run.

The child process runs ``prepare`` on the demo catalog against a SQLite ledger; the parent
kills it with SIGKILL (no cleanup code can run) at a random delay, then resumes the run
in-process from the log alone (providers rebuilt from ``RunCreated``). The resumed run must
end with exactly the deployments of an uninterrupted run, and its log must fold legally with
no fact recorded twice.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from domain.config import CollectionConfig
from domain.errors import UnknownRun
from runtime.assets.demo_catalog import write_demo_catalog
from runtime.assets.providers import DirectoryAssetProvider
from runtime.files import report_text
from runtime.prepare import prepare, resume_preparation
from store import EventStore
from store.projections.preparation_report import preparation_report

REPO = Path(__file__).resolve().parents[2]
DEMO_TASK = REPO / "runtime" / "demo" / "task.yaml"
CFG = CollectionConfig(seed=11, max_batches=3)
KILLS_WANTED = 5
MAX_ATTEMPTS = 14

CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from domain.config import CollectionConfig
from runtime.assets.providers import DirectoryAssetProvider
from runtime.prepare import prepare
from store import EventStore


class Slow(DirectoryAssetProvider):
    # Same description (so resume rebuilds a plain provider), a little slower, so kills land
    # inside listing, materializing and deployment writing rather than all after the end.
    def materialize(self, candidate, context):
        time.sleep(0.005)
        return super().materialize(candidate, context)


_, repo, url, catalog, out, run_id = sys.argv
store = EventStore(url)
provider = Slow(catalog)
prepare(
    Path(repo) / "runtime" / "demo" / "task.yaml", {"item": provider, "bin": provider},
    cfg=CollectionConfig(seed=11, max_batches=3), output_dir=out, store=store, run_id=run_id,
)
"""


def _event_count(db: Path, run_id: str) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        return conn.execute("SELECT COUNT(*) FROM events WHERE run_id = ?", (run_id,)).fetchone()[0]


def _kill_during_preparation(
    script: Path, db: Path, catalog: Path, out: Path, run_id: str, target: int, delay: float
) -> None:
    """SIGKILL the child ``delay`` seconds after its log reached ``target`` events."""
    log_path = out.parent / f"{run_id}.log"
    with open(log_path, "wb") as log:
        child = subprocess.Popen(
            [sys.executable, str(script), str(REPO), f"sqlite:///{db}", str(catalog), str(out),
             run_id],
            stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while child.poll() is None and _event_count(db, run_id) < target:
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.002)
            time.sleep(delay)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()


@pytest.mark.timeout(240)
def test_sigkill_during_preparation_then_resume_matches_clean_run(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog"
    write_demo_catalog(catalog)
    db = tmp_path / "ledger.db"
    url = f"sqlite:///{db}"
    both = {role: DirectoryAssetProvider(catalog) for role in ("item", "bin")}
    baseline = prepare(
        DEMO_TASK, both, cfg=CFG, output_dir=tmp_path / "baseline", store=EventStore(url)
    )
    expected_ids = [d.asset_set_id for d in baseline.deployments]
    expected_manifests = [(d.path / "manifest.json").read_bytes() for d in baseline.deployments]

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    total = len(EventStore(url).read(baseline.run_id))
    rng = random.Random()
    # One random kill point in each stretch of the log: listing/preparing either role,
    # resolving and materializing batches, and right before completion.
    bands = [(1, 3), (4, total // 2), (total // 2, total - 8), (total - 8, total - 3),
             (total - 3, total - 1)]
    killed_while_preparing: list[str] = []
    last_events: list[str] = []
    for attempt in range(MAX_ATTEMPTS):
        if len(killed_while_preparing) >= KILLS_WANTED:
            break
        run_id = f"run-20260101-000000-{attempt:06x}"
        out = tmp_path / f"out{attempt}"
        low, high = bands[len(killed_while_preparing)]
        target, delay = rng.randint(low, high), rng.uniform(0.0, 0.02)
        _kill_during_preparation(script, db, catalog, out, run_id, target, delay)
        store = EventStore(url)
        try:
            state = store.state(run_id)
        except UnknownRun:
            continue  # killed before RunCreated: nothing to resume
        if state.state != "preparing":
            continue  # the child finished before the kill
        killed_while_preparing.append(run_id)
        chain = store.verify_chain(run_id)  # the kill left a prefix whose chain verifies
        assert chain.ok, chain.summary()
        last_events.append(f"{len(store.read(run_id))}:{store.read(run_id)[-1].type}")

        result = resume_preparation(run_id, store=store)

        assert [d.asset_set_id for d in result.deployments] == expected_ids
        assert [(d.path / "manifest.json").read_bytes() for d in result.deployments] == (
            expected_manifests
        )
        fresh = EventStore(url)  # folds the whole log from scratch: it must be legal
        assert fresh.state(run_id).state == "prepared"
        events = fresh.read(run_id)
        assert fresh.verify_chain(run_id, noted_head=chain.head).ok
        kinds = [e.type for e in events]
        assert kinds.count("RunResumed") == 1
        assert Counter(
            e.payload["role"] for e in events if e.type == "CandidatesListed"
        ) == {"item": 1, "bin": 1}
        prepared = Counter(
            (e.payload["role"], e.payload["candidate_id"])
            for e in events if e.type == "CandidatePrepared"
        )
        assert set(prepared.values()) == {1}
        for fact in ("BatchResolved", "DeploymentMaterialized"):
            assert sorted(e.payload["batch_index"] for e in events if e.type == fact) == [0, 1, 2]
        assert result.report_path.read_text() == report_text(preparation_report(events))
        leftovers = [p for p in out.rglob("*") if ".partial-" in p.name or ".tmp-" in p.name]
        assert leftovers == []
    print("killed after", last_events)
    assert len(killed_while_preparing) >= KILLS_WANTED, last_events
