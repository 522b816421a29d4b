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

from domain.errors import LeaseHeld, SessionLost
from store import EventStore, InMemoryEventStore, LeaseLost, NewEvent
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
    lost = r"lease of 'old' \(token 1\) was lost: run 'r' is held by owner 'new'.*\(token 2\)"
    with pytest.raises(LeaseLost, match=lost):
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


def test_every_acquisition_increments_the_fencing_token(store) -> None:
    store.append("r", [created("r")], expected_version=0)
    first = store.acquire_lease("r", owner="a", ttl_s=30)
    assert first.token == 1 and first.tag == "a.1"
    first.release()
    assert store.lease_info("r") is None
    second = store.acquire_lease("r", owner="b", ttl_s=0.05)
    assert (second.token, second.taken_over) == (2, None)  # a release is not a takeover
    time.sleep(0.1)
    third = store.acquire_lease("r", owner="c", ttl_s=30)
    assert third.token == 3 and third.taken_over is not None
    assert store.lease_info("r").token == 3
    assert [e.type for e in store.read("r")] == ["RunCreated", "LeaseTakenOver"]


def test_a_stale_holder_can_neither_append_nor_pass_a_check(store) -> None:
    """The fence is the token, checked in the append's own transaction: a holder that was
    taken over gets LeaseLost (a SessionLost) and writes nothing; the new holder goes on."""
    store.append("r", [created("r")], expected_version=0)
    old = store.acquire_lease("r", owner="old", ttl_s=0.05)
    store.append("r", [NewEvent("PreparationStarted", _identity())], expected_version=1,
                 fence=old)
    old.check()
    time.sleep(0.1)
    new = store.acquire_lease("r", owner="new", ttl_s=30)
    version = store.state("r").version
    with pytest.raises(SessionLost, match=r"lease of 'old' \(token 1\) was lost"):
        store.append("r", [NewEvent("RunFailed", _failed())], expected_version=version,
                     fence=old)
    with pytest.raises(LeaseLost):
        old.check()
    assert store.state("r").version == version
    assert [e.type for e in store.read("r")] == [
        "RunCreated", "PreparationStarted", "LeaseTakenOver",
    ]
    new.check()
    store.append("r", [NewEvent("RunFailed", _failed())], expected_version=version, fence=new)
    new.release()
    with pytest.raises(LeaseLost, match="released"):
        new.check()


def test_a_released_lease_cannot_append(store) -> None:
    store.append("r", [created("r")], expected_version=0)
    lease = store.acquire_lease("r", owner="me", ttl_s=30)
    lease.release()
    lease.released = False  # as if the object still believed it held the run
    with pytest.raises(LeaseLost, match="has no lease"):
        store.append("r", [NewEvent("RunFailed", _failed())], expected_version=1, fence=lease)


def _identity() -> dict:
    return {"session_id": "s1", "host": socket.gethostname(), "pid": os.getpid()}


def _failed() -> dict:
    return {
        "phase": "preparing", "error_type": "X", "detail": "d", "traceback": "",
        "batch_index": None, "episode_index": None,
    }


def test_an_append_racing_a_takeover_is_fenced_atomically(backend_url: str) -> None:
    """A takeover that has moved the token but not yet committed: the old holder's append
    waits for it (SQLite: the write lock; PostgreSQL: the lease row lock taken by the
    fence's UPDATE) and is then refused, instead of reading the old token and writing."""
    import threading

    import sqlalchemy as sa

    store = EventStore(backend_url)
    store.append("r", [created("r")], expected_version=0)
    old = store.acquire_lease("r", owner="old", ttl_s=30)
    taker = store.engine.execution_options(sqlite_begin="IMMEDIATE").connect()
    transaction = taker.begin()
    taker.execute(sa.text("UPDATE leases SET token = token + 1, owner = 'new' WHERE run_id = 'r'"))
    outcome: list[BaseException | int] = []

    def append() -> None:
        try:
            outcome.append(store.append(
                "r", [NewEvent("PreparationStarted", _identity())], expected_version=1, fence=old
            ))
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    writer = threading.Thread(target=append)
    writer.start()
    writer.join(0.5)
    assert writer.is_alive(), f"the fenced append did not wait for the takeover: {outcome}"
    transaction.commit()
    taker.close()
    writer.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], LeaseLost), outcome
    assert [e.type for e in store.read("r")] == ["RunCreated"]
    store.close()
