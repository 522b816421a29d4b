"""The hash chain: computed on append, kept across sessions, and every attack on the stored
log found by a re-walk that names the exact place.

Attacks really attack: the immutability triggers are dropped and rows are rewritten with
plain SQL, as someone holding the database file could.
"""

from __future__ import annotations

import hashlib

import pytest
import sqlalchemy as sa
from alembic import command

from domain.chain import GENESIS, event_bytes, time_text
from store import EventStore, InMemoryEventStore
from store.admin import alembic_config, current, head_revision
from tests.store.eventgen import episode
from tests.store.test_event_store import collecting, raw_sql


def _drop_triggers(url: str) -> None:
    if url.startswith("sqlite"):
        raw_sql(url, "DROP TRIGGER events_no_update")
        raw_sql(url, "DROP TRIGGER events_no_delete")
    else:
        raw_sql(url, "DROP TRIGGER events_immutable ON events")


def _run_with_episodes(store, run_id: str = "r", episodes: int = 3) -> int:
    version = collecting(store, run_id)
    for e in range(episodes):
        version = store.append(run_id, episode(0, e), expected_version=version)
    return version


def test_chain_links_every_event_and_the_run_keeps_the_head(backend_store, backend_url) -> None:
    version = _run_with_episodes(backend_store)
    rows = raw_sql(
        backend_url,
        "SELECT seq, type, schema_version, payload, prev_hash, hash FROM events "
        "WHERE run_id = 'r' ORDER BY seq",
    )
    events = backend_store.read("r")
    assert len(rows) == version == len(events)
    prev = GENESIS
    for row, event in zip(rows, events, strict=True):
        seq, event_type, schema_version, payload, prev_hash, digest = row
        assert prev_hash == prev
        expected = hashlib.sha256(event_bytes(
            "r", seq, event_type, schema_version, payload, time_text(event.recorded_at), prev
        )).hexdigest()
        assert digest == expected
        prev = digest
    ((head,),) = raw_sql(backend_url, "SELECT head_hash FROM runs WHERE run_id = 'r'")
    assert head == prev == backend_store.head_hash("r")
    report = backend_store.verify_chain("r", noted_head=head)
    assert report.ok and report.events == version and report.head == head


def test_chain_continues_across_sessions(backend_url: str) -> None:
    with EventStore(backend_url) as first:
        version = _run_with_episodes(first, episodes=1)
        head = first.head_hash("r")
    with EventStore(backend_url) as second:  # a resumed session: cold cache
        version = second.append("r", episode(0, 1), expected_version=version)
        report = second.verify_chain("r", noted_head=head)
    assert report.ok and report.events == version
    assert report.notes == [f"the noted head is seq {version - 6}; seq {version - 5}..{version} "
                            "were appended after it was noted"]


def test_append_after_a_fold_cached_without_its_head_still_chains(backend_store) -> None:
    """A fold restored by other means (no head cached) chains to the stored last hash."""
    version = _run_with_episodes(backend_store, episodes=1)
    backend_store._heads.clear()
    backend_store.append("r", episode(0, 1), expected_version=version)
    assert backend_store.verify_chain("r").ok


def test_in_memory_store_chains_and_detects_an_edit() -> None:
    store = InMemoryEventStore()
    _run_with_episodes(store)
    assert store.verify_chain("r").ok
    rows = store._events["r"]
    row = list(rows[13])
    row[3] = row[3].replace('"seed":1', '"seed":2')
    rows[13] = tuple(row)
    report = store.verify_chain("r")
    assert report.problem == (
        "seq 14 (EpisodeStarted) differs from what was recorded: its content no longer "
        "matches its hash"
    )


def test_changed_payload_byte_is_named(backend_store, backend_url) -> None:
    _run_with_episodes(backend_store)
    _drop_triggers(backend_url)
    raw_sql(backend_url, "UPDATE events SET payload = REPLACE(payload, :old, :new) "
            "WHERE run_id = 'r' AND seq = 16", old='"steps":10', new='"steps":11')
    with EventStore(backend_url) as fresh:
        report = fresh.verify_chain("r")
    assert report.problem == (
        "seq 16 (EpisodeExecuted) differs from what was recorded: its content no longer "
        "matches its hash"
    )
    assert report.problem_seq == 16 and report.events == 15


def test_deleted_event_is_named_as_the_missing_seq(backend_store, backend_url) -> None:
    _run_with_episodes(backend_store)
    _drop_triggers(backend_url)
    raw_sql(backend_url, "DELETE FROM events WHERE run_id = 'r' AND seq = 12")
    report = backend_store.verify_chain("r")
    assert report.problem == "seq 12 is missing (the log goes from seq 11 to seq 13)"


def test_swapped_events_are_named_as_a_reordering(backend_store, backend_url) -> None:
    _run_with_episodes(backend_store)
    _drop_triggers(backend_url)
    # Swap seq 14 and 15 (the unique constraint needs a parking value).
    raw_sql(backend_url, "UPDATE events SET seq = -1 WHERE run_id = 'r' AND seq = 14")
    raw_sql(backend_url, "UPDATE events SET seq = 14 WHERE run_id = 'r' AND seq = 15")
    raw_sql(backend_url, "UPDATE events SET seq = 15 WHERE run_id = 'r' AND seq = -1")
    report = backend_store.verify_chain("r")
    assert report.problem == (
        "events reordered: the event now at seq 14 (InitialChecked) was recorded as seq 15"
    )


def test_rewritten_event_with_its_own_hash_recomputed_is_named(
    backend_store, backend_url
) -> None:
    _run_with_episodes(backend_store)
    _drop_triggers(backend_url)
    ((payload, at, prev),) = raw_sql(
        backend_url, "SELECT payload, recorded_at, prev_hash FROM events "
        "WHERE run_id = 'r' AND seq = 10"
    )
    forged = payload.replace('"steps":10', '"steps":99')
    at_text = time_text(backend_store.read("r")[9].recorded_at)
    digest = hashlib.sha256(
        event_bytes("r", 10, "EpisodeExecuted", 1, forged, at_text, prev)
    ).hexdigest()
    raw_sql(backend_url, "UPDATE events SET payload = :p, hash = :h WHERE run_id = 'r' AND "
            "seq = 10", p=forged, h=digest)
    report = backend_store.verify_chain("r")
    assert report.problem == (
        "seq 10 (EpisodeExecuted) was rewritten: seq 11 chains to a different hash"
    )


def test_truncated_tail_is_found_by_version_and_by_noted_head(backend_store, backend_url) -> None:
    version = _run_with_episodes(backend_store)
    noted = backend_store.head_hash("r")
    _drop_triggers(backend_url)
    raw_sql(backend_url, f"DELETE FROM events WHERE run_id = 'r' AND seq > {version - 6}")
    report = backend_store.verify_chain("r")
    assert report.problem == (
        f"the log ends at seq {version - 6} but the run's version is {version}: events from "
        f"seq {version - 5} on are missing (tail truncated)"
    )
    # A careful attacker also rewinds the runs row: only the noted head still tells.
    ((old_head,),) = raw_sql(
        backend_url, f"SELECT hash FROM events WHERE run_id = 'r' AND seq = {version - 6}"
    )
    raw_sql(backend_url, "UPDATE runs SET version = :v, head_hash = :h WHERE run_id = 'r'",
            v=version - 6, h=old_head)
    assert backend_store.verify_chain("r").ok
    report = backend_store.verify_chain("r", noted_head=noted)
    assert report.problem == (
        f"the noted head {noted} is not in this run's chain (which ends at seq {version - 6} "
        f"with head {old_head}): events were altered, removed or truncated since"
    )


def test_opening_a_store_never_repairs_a_broken_chain(backend_store, backend_url) -> None:
    _run_with_episodes(backend_store)
    _drop_triggers(backend_url)
    raw_sql(backend_url, "UPDATE runs SET head_hash = :h WHERE run_id = 'r'", h="a" * 64)
    before = raw_sql(backend_url, "SELECT seq, hash FROM events ORDER BY seq")
    with EventStore(backend_url) as reopened:
        reopened.state("r")
        assert not reopened.verify_chain("r").ok
    assert raw_sql(backend_url, "SELECT seq, hash FROM events ORDER BY seq") == before
    ((head,),) = raw_sql(backend_url, "SELECT head_hash FROM runs")
    assert head == "a" * 64


def test_migration_0002_backfills_an_existing_log_in_order(backend_url: str) -> None:
    url = backend_url
    sqlite = url.startswith("sqlite")
    command.upgrade(alembic_config(url), "0001_initial")
    assert current(url) == "0001_initial"
    # A log written by the 0001-era store: no hash columns yet.
    twin = InMemoryEventStore()
    _run_with_episodes(twin, episodes=2)
    raw_sql(url, "INSERT INTO runs (run_id, created_at, updated_at, state, version) "
            "VALUES ('r', :a, :a, 'collecting', :v)", a=twin._events["r"][0][4],
            v=len(twin._events["r"]))
    for _pos, seq, event_type, text, at, version, _prev, _h in twin._events["r"]:
        raw_sql(url, "INSERT INTO events (run_id, seq, type, payload, recorded_at, "
                "schema_version) VALUES ('r', :s, :t, :p, :a, :v)",
                s=seq, t=event_type, p=text, v=version,
                a=at.strftime("%Y-%m-%d %H:%M:%S.%f") if sqlite else at)
    with EventStore(url) as store:  # opening upgrades to head, which backfills
        assert current(url) == head_revision()
        report = store.verify_chain("r")
        assert report.ok and report.events == len(twin._events["r"])
        # The backfill hashed exactly what the store hashes: same content, same chain.
        assert report.head == twin.head_hash("r")
        version = store.append("r", episode(0, 2), expected_version=report.events)
        assert store.verify_chain("r").ok and store.verify_chain("r").events == version
    with pytest.raises(sa.exc.IntegrityError, match="UPDATE refused"):  # triggers restored
        raw_sql(url, "UPDATE events SET seq = seq WHERE seq = 1")
    with pytest.raises(sa.exc.IntegrityError, match="DELETE refused"):
        raw_sql(url, "DELETE FROM events WHERE seq = 1")
