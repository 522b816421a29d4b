"""A writer SIGKILLed at random moments never loses an acknowledged append or leaves a gap."""

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
KILLS = 20


def _reader(stream, acked: list[int], first: threading.Event) -> None:
    for line in stream:
        acked.append(int(line))
        first.set()


def test_sigkill_never_loses_acknowledged_appends(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    rng = random.Random(1234)
    acknowledged: list[int] = []
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _round in range(KILLS):
        acked: list[int] = []
        first = threading.Event()
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.store.crash_writer", url, "run-crash"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        reader = threading.Thread(target=_reader, args=(proc.stdout, acked, first))
        reader.start()
        if not first.wait(20):
            proc.kill()
            raise AssertionError(f"writer never acknowledged: {proc.stderr.read()}")
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        reader.join()
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
        proc.stderr.close()
        acknowledged.extend(acked)

        with EventStore(url) as store:
            seqs = [e.seq for e in store.read("run-crash")]
            assert seqs == list(range(1, len(seqs) + 1)), "gap in the log"
            assert max(acked) <= len(seqs), "an acknowledged append is missing"
            state = store.state("run-crash")  # the fold of the survivor log is legal
            assert state.version == len(seqs)
    assert len(set(acknowledged)) > KILLS
    with EventStore(url) as store:
        # PreparationStarted, CollectionStarted and one RunResumed per restart (KILLS - 1)
        assert store.state("run-crash").session == KILLS + 1
