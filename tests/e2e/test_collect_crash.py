"""The resume guarantee, tested the hard way: SIGKILL the collector, resume, compare.

An uninterrupted collection of the demo task (on the gantry: 3 batches x 4 episodes; on the
arm: 1 x 4) is the reference.
Then, attempt after attempt, the same task and seed are prepared as a new run, a collector
subprocess is killed with SIGKILL at a random moment inside the reference's observed duration,
and a resume subprocess finishes the run. Each finished run must have exactly the reference's
accepted (batch, episode) set and trajectory content (arrays, and metadata but the run id it
names), one commit per accepted episode (none twice, none missing), every committed file
intact on disk, and a log the fold accepts. The demo task records two cameras, so every
commit also lists its camera files (videos, depth, segmentation, metadata): they must be
byte-identical to the reference's too, across processes and after any number of kills (the arm
profile; the gantry profile, which needs many more kills, runs its task without cameras to stay
within its time budget).

Run as a script, this file is the child process: ``python test_collect_crash.py DB RUN MODE
SPAWNED_AT`` collects or resumes RUN and prints its timings as JSON.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SEED, SETTLE = 7, 20
# robot -> (batches, episodes per batch, kills required, attempts allowed). The arm's episodes
# are slower, so its run is smaller; the guarantee checked is the same.
PROFILES = {"gantry": (3, 4, 10, 18), "arm": (1, 4, 2, 6)}


def _child(db_url: str, run_id: str, mode: str, spawned_at: float) -> None:
    from runtime.logging import configure_logging

    configure_logging(level="warning")
    from runtime.collection import collect
    from runtime.resume import NothingToResume, resume
    from store import EventStore

    imported = time.time() - spawned_at
    store = EventStore(db_url)
    action = collect if mode == "collect" else resume
    try:
        result = action(run_id, store=store, progress=False)
    except NothingToResume:
        result = None
    print(
        json.dumps(
            {
                "import_s": imported,
                "total_s": time.time() - spawned_at,
                "unlogged": [str(p) for p in getattr(result, "unlogged_recordings", ())],
                "restored": [str(p) for p in getattr(result, "paths", ())],
                "nothing_to_resume": result is None,
            }
        ),
        flush=True,
    )


def _spawn(db_url: str, run_id: str, mode: str, workdir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), db_url, run_id, mode, repr(time.time())],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], what: str) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, f"{what} exited {proc.returncode}:\n{err[-4000:]}"
    return json.loads(out.strip().splitlines()[-1])


def _outcome(
    store: Any, run_id: str, output_dir: Path, batches: int, episodes: int
) -> dict[str, Any]:
    """Accepted set and commit digests of a finished run, after checking its invariants."""
    from domain.state import fold
    from runtime.files import file_sha256, report_text
    from store.projections.collection_report import collection_report
    from tests.runtime.trajectory_content import content_digest

    events = store.read(run_id)
    state = fold(run_id, events)  # raises IllegalTransition if any event is illegal
    assert state.state == "completed", f"{run_id} ended {state.state}"
    chain = store.verify_chain(run_id)  # one chain across the killed and resumed sessions
    assert chain.ok and chain.events == len(events), chain.summary()
    commits: dict[tuple[int, int], tuple[str, tuple[tuple[Any, ...], ...]]] = {}
    finished: list[tuple[int, int]] = []
    judged: dict[tuple[int, int], bool] = {}
    for event in events:
        p = event.payload
        if event.type == "EpisodeJudged":
            judged[(p["batch_index"], p["episode_index"])] = p["accepted"]
        if event.type in ("TrajectoryCommitted", "TrajectoryDiscarded"):
            key = (p["batch_index"], p["episode_index"])
            finished.append(key)
            if event.type == "TrajectoryCommitted":
                assert key not in commits, f"{run_id}: episode {key} committed twice"
                files = tuple(
                    (f["camera"], f["modality"], Path(f["path"]).name, f["bytes"], f["sha256"])
                    for f in p["files"]
                )
                commits[key] = (content_digest(output_dir / p["path"]), files)
                for entry in [p, *p["files"]]:
                    path = output_dir / entry["path"]
                    assert path.is_file(), f"{run_id}: committed {path} is missing"
                    assert file_sha256(path) == entry["sha256"], f"{run_id}: {path} differs"
    assert len(finished) == len(set(finished)), f"{run_id}: an episode finished twice"
    every = {(b, e) for b in range(batches) for e in range(episodes)}
    assert set(finished) == every, f"{run_id}: episodes missing {sorted(every - set(finished))}"
    accepted = {key for key in every if judged[key]}
    assert accepted == set(commits), f"{run_id}: accepted without commit or vice versa"
    report = (output_dir / "report.json").read_text(encoding="utf-8")
    assert report == report_text(collection_report(events))
    return {"accepted": accepted, "commits": commits, "events": events}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("robot", sorted(PROFILES))
def test_sigkill_at_random_moments_then_resume_matches_uninterrupted(
    tmp_path: Path, robot: str
) -> None:
    from runtime.collection.demo_run import prepare_demo_run, write_catalog
    from store import EventStore

    batches, episodes, min_kills, max_attempts = PROFILES[robot]
    seed = int(os.environ.get("ASSETCAST_CRASH_SEED", random.SystemRandom().randrange(2**32)))
    rng = random.Random(seed)
    db_url = f"sqlite:///{tmp_path / 'crash.db'}"
    store = EventStore(db_url)
    catalog = write_catalog(tmp_path / "catalog")

    def new_run(name: str) -> tuple[str, Path]:
        out = tmp_path / name
        run_id = prepare_demo_run(
            store, out, catalog, seed=SEED, batches=batches, episodes_per_batch=episodes,
            settle_steps=SETTLE, arm=robot == "arm", cameras=robot == "arm",
        )
        return run_id, out

    ref_id, ref_out = new_run("reference")
    timing = _finish(_spawn(db_url, ref_id, "collect", tmp_path), "reference collect")
    reference = _outcome(store, ref_id, ref_out, batches, episodes)
    assert reference["accepted"], "the reference run should accept some episodes"
    camera_files = 7 if robot == "arm" else 0  # the gantry profile runs without cameras
    assert all(len(files) == camera_files for _, files in reference["commits"].values())
    low, high = 0.8 * timing["import_s"], timing["total_s"]

    kills, attempts, unlogged_seen, resumed_events, late_kills = 0, 0, 0, 0, 0
    while kills < min_kills:
        assert attempts < max_attempts, f"only {kills} kills in {attempts} attempts (seed {seed})"
        attempts += 1
        run_id, out = new_run(f"attempt_{attempts:02d}")
        proc = _spawn(db_url, run_id, "collect", tmp_path)
        delay = rng.uniform(low, high)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        else:  # finished before its kill moment: a valid run, but not a kill
            _finish(proc, "unkilled collect")
        killed = proc.returncode == -signal.SIGKILL
        # A kill that lands after RunCompleted was committed leaves no collection to resume,
        # only (when it came before report.json was written) a report to rewrite; only
        # kills that interrupted the collection count.
        interrupted = killed and store.state(run_id).state != "completed"
        if killed:
            chain = store.verify_chain(run_id)  # the kill left a prefix whose chain verifies
            assert chain.ok, f"{chain.summary()} (seed {seed})"
            result = _finish(_spawn(db_url, run_id, "resume", tmp_path), f"resume of {run_id}")
            unlogged_seen += len(result["unlogged"])
            late_kills += not interrupted
            assert result["nothing_to_resume"] == (not interrupted and not result["restored"])
        kills += interrupted
        outcome = _outcome(store, run_id, out, batches, episodes)
        context = f"(seed {seed}, attempt {attempts}, killed after {delay:.2f}s)"
        assert outcome["accepted"] == reference["accepted"], f"accepted set differs {context}"
        assert outcome["commits"] == reference["commits"], f"file digests differ {context}"
        resumed_events += sum(1 for e in outcome["events"] if e.type == "RunResumed")
    assert kills >= min_kills
    print(f"crash test: seed {seed}, {kills} kills in {attempts} attempts "
          f"(+{late_kills} after RunCompleted), {unlogged_seen} unlogged recordings ignored, "
          f"{resumed_events} RunResumed")


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
