"""Leases: one live session per run, takeovers of dead or expired holders."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from domain.errors import LeaseHeld
from store import EventStore, InMemoryEventStore, LeaseLost
from tests.store.eventgen import created

REPO = Path(__file__).resolve().parents[2]


def _spawn(url: str, owner: str, start_at: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.lease_worker", url, "r", owner, str(start_at)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_two_processes_race_one_wins_then_takeover_after_sigkill(backend_url: str) -> None:
    db_url = backend_url
    with EventStore(db_url) as store:
        store.append("r", [created("r")], expected_version=0)
    start_at = time.time() + 2.0
    racers = {name: _spawn(db_url, name, start_at) for name in ("alpha", "beta")}
    lines = {name: p.stdout.readline().strip() for name, p in racers.items()}
    winners = [n for n, line in lines.items() if line == "WON"]
    assert len(winners) == 1, lines
    (winner,) = winners
    (loser,) = set(racers) - {winner}
    winner_pid = racers[winner].pid
    assert lines[loser].startswith(
        f"HELD run 'r' is held by owner {winner!r} (pid {winner_pid} on host "
        f"{socket.gethostname()!r})"
    )
    assert racers[loser].wait(10) == 0

    os.kill(winner_pid, signal.SIGKILL)
    racers[winner].wait(10)
    third = _spawn(db_url, "gamma", 0.0)
    try:
        assert third.stdout.readline().strip() == "WON", third.stderr.read()
    finally:
        third.kill()
        third.wait(10)
        for p in racers.values():
            p.stdout.close()
            p.stderr.close()
        third.stdout.close()
        third.stderr.close()
    with EventStore(db_url) as store:
        (takeover,) = [e for e in store.read("r") if e.type == "LeaseTakenOver"]
        assert takeover.payload["previous_owner"] == winner
        assert takeover.payload["previous_pid"] == winner_pid
        assert takeover.payload["owner"] == "gamma"
        assert store.state("r").lease_takeovers[0]["seq"] == takeover.seq


@pytest.fixture(params=["sql", "memory", "postgresql"])
def store(request: pytest.FixtureRequest, db_url: str):
    if request.param == "postgresql":
        s = EventStore(request.getfixturevalue("pg_url"))
    else:
        s = InMemoryEventStore() if request.param == "memory" else EventStore(db_url)
    yield s
    s.close()


def test_second_session_in_same_process_is_refused(store) -> None:
    lease = store.acquire_lease("r", owner="one", ttl_s=30)
    with pytest.raises(LeaseHeld, match=r"run 'r' is held by owner 'one' \(pid \d+ on host"):
        store.acquire_lease("r", owner="two")
    lease.release()
    store.acquire_lease("r", owner="two").release()


def test_expired_lease_is_taken_over_and_logged(store) -> None:
    store.append("r", [created("r")], expected_version=0)
    old = store.acquire_lease("r", owner="old", ttl_s=0.05)
    time.sleep(0.1)
    new = store.acquire_lease("r", owner="new", ttl_s=30)
    assert new.taken_over is not None and new.taken_over.owner == "old"
    assert [e.type for e in store.read("r")] == ["RunCreated", "LeaseTakenOver"]
    with pytest.raises(LeaseLost, match="lease of 'old' was lost: run 'r' is held by owner 'new'"):
        old.heartbeat()
    old.release()  # releasing a lost lease must not free the new holder's lease
    with pytest.raises(LeaseHeld, match="owner 'new'"):
        store.acquire_lease("r", owner="third")


def test_heartbeat_extends_and_keep_alive_beats(store) -> None:
    lease = store.acquire_lease("r", owner="me", ttl_s=0.3)
    first = lease.expires_at
    with lease.keep_alive(interval_s=0.05):
        time.sleep(0.5)
    assert lease.expires_at > first
    with pytest.raises(LeaseHeld):  # still live thanks to the heartbeats
        store.acquire_lease("r", owner="other")
    with lease:
        pass
    assert store.lease_info("r") is None


def test_keep_alive_raises_when_lease_is_lost(store) -> None:
    lease = store.acquire_lease("r", owner="me", ttl_s=0.05)
    with pytest.raises(LeaseLost), lease.keep_alive(interval_s=0.2):
        time.sleep(0.1)
        store.acquire_lease("r", owner="thief", ttl_s=30)
        time.sleep(0.3)
