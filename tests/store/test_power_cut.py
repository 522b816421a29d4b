"""Power-cut style recovery: what was fsynced survives, what was not may be lost or torn.

A writer appends with durable commits and prints, after each acknowledged commit, the
WAL's length. The writer is frozen at a random moment and the database files are copied
as they are; then the copy's WAL is cut anywhere past the last acknowledged length and
the unsynced tail is partly overwritten with garbage (a torn write). Opening the copy
must recover a gap-free log holding every acknowledged append, no partial transaction,
and a legal fold.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from domain.state import fold
from store import EventStore

REPO = Path(__file__).resolve().parents[2]
CUTS = 8


def _reader(stream, acked: list[tuple[int, int]], first: threading.Event) -> None:
    for line in stream:
        fields = line.split()
        if not line.endswith("\n") or len(fields) != 2:
            continue  # cut off by the kill mid-print: not an acknowledgement
        acked.append((int(fields[0]), int(fields[1])))
        first.set()


def _cut_once(tmp_path: Path, index: int, rng: random.Random) -> tuple[int, int]:
    db = tmp_path / f"live{index}.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.store.powercut_writer", f"sqlite:///{db}", "run-p"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    acked: list[tuple[int, int]] = []
    first = threading.Event()
    reader = threading.Thread(target=_reader, args=(proc.stdout, acked, first))
    reader.start()
    try:
        assert first.wait(30), f"writer never acknowledged: {proc.stderr.read()}"
        time.sleep(rng.uniform(0.02, 0.3))
        os.kill(proc.pid, signal.SIGSTOP)  # the machine stops here
        copy = tmp_path / f"cut{index}.db"
        shutil.copyfile(db, copy)
        wal = (tmp_path / f"live{index}.db-wal").read_bytes()
    finally:
        proc.kill()
        proc.wait()
        reader.join()
        proc.stderr.close()
    acked_version, synced = acked[-1]
    assert synced <= len(wal)
    cut = rng.randint(synced, len(wal))
    tail = bytearray(wal[:cut])
    if cut > synced:
        start = rng.randint(synced, cut - 1)
        tail[start:cut] = rng.randbytes(cut - start)
    Path(f"{copy}-wal").write_bytes(bytes(tail))  # no -shm: recovery rebuilds the index

    with EventStore(f"sqlite:///{copy}") as store:
        events = store.read("run-p")
        chain = store.verify_chain("run-p")
    assert chain.ok and chain.events == len(events), chain.summary()  # a prefix, unbroken
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), "gap in the recovered log"
    assert len(events) >= acked_version, "an acknowledged append was lost"
    fold("run-p", events)
    last_episode = [e for e in events if e.payload.get("episode_index") is not None]
    if last_episode:
        index_of_last = last_episode[-1].payload["episode_index"]
        if index_of_last % 2 == 0:  # appended as ONE transaction: all of it or nothing
            assert last_episode[-1].type == "ResetSubmitted", "a transaction was torn"
    return acked_version, len(events)


def test_power_cut_keeps_every_acknowledged_append(tmp_path: Path) -> None:
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    outcomes = [_cut_once(tmp_path, index, rng) for index in range(CUTS)]
    assert all(recovered >= acked for acked, recovered in outcomes), seed
    assert sum(acked for acked, _ in outcomes) > CUTS * 10, "the writer barely ran"
