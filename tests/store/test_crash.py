"""A writer SIGKILLed at random moments never loses an acknowledged append or leaves a gap.

Two lanes run side by side on one database file (two runs, two writers at a time),
which halves the wall time and also exercises concurrent writers on one file.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from store import EventStore

REPO = Path(__file__).resolve().parents[2]
KILLS_PER_LANE = 11
LANES = 2


def _reader(stream, acked: list[int], first: threading.Event) -> None:
    for line in stream:
        acked.append(int(line))
        first.set()


def _lane(url: str, run_id: str, seed: int) -> int:
    """Start, kill and check a writer KILLS_PER_LANE times; return appends acknowledged."""
    rng = random.Random(seed)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    total = 0
    for _round in range(KILLS_PER_LANE):
        acked: list[int] = []
        first = threading.Event()
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.store.crash_writer", url, run_id],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        reader = threading.Thread(target=_reader, args=(proc.stdout, acked, first))
        reader.start()
        if not first.wait(30):
            proc.kill()
            raise AssertionError(f"writer never acknowledged: {proc.stderr.read()}")
        time.sleep(rng.uniform(0.0, 0.2))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        reader.join()
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
        proc.stderr.close()
        total += len(acked)

        with EventStore(url) as store:
            seqs = [e.seq for e in store.read(run_id)]
            assert seqs == list(range(1, len(seqs) + 1)), "gap in the log"
            assert max(acked) <= len(seqs), "an acknowledged append is missing"
            state = store.state(run_id)  # the surviving log folds legally
            assert state.version == len(seqs)
            chain = store.verify_chain(run_id)  # no torn chain: the prefix verifies
            assert chain.ok and chain.events == len(seqs), chain.summary()
    with EventStore(url) as store:
        # PreparationStarted, CollectionStarted and one RunResumed per restart
        assert store.state(run_id).session == KILLS_PER_LANE + 1
    return total


def test_sigkill_never_loses_acknowledged_appends(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    EventStore(url).close()  # schema first, so the lanes do not both start on an empty file
    results: dict[int, object] = {}

    def run(lane: int) -> None:
        try:
            results[lane] = _lane(url, f"run-{lane}", seed=1000 + lane)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            results[lane] = exc

    threads = [threading.Thread(target=run, args=(lane,)) for lane in range(LANES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for lane in range(LANES):
        if isinstance(results[lane], BaseException):
            raise results[lane]  # type: ignore[misc]
        assert results[lane] > KILLS_PER_LANE  # every round acknowledged something
    assert LANES * KILLS_PER_LANE >= 20
