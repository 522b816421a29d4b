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

from domain.chain import GENESIS, ChainBroken, event_bytes, time_text
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


# ------------------------------------------------------------ the cheap, anchored check


def _anchored_run(url: str, episodes: int = 5) -> tuple[int, int]:
    """A run written with a snapshot every 10 events: (version, anchor seq)."""
    with EventStore(url, snapshot_every=10) as store:
        version = _run_with_episodes(store, episodes=episodes)
        anchor = store.chain_anchor("r")
    assert anchor is not None and 10 <= anchor.seq < version
    return version, anchor.seq


def test_cheap_check_walks_only_the_events_after_the_verified_anchor(backend_url) -> None:
    version, anchor = _anchored_run(backend_url)
    with EventStore(backend_url) as store:
        report = store.check_chain("r")
        full = store.verify_chain("r")
        assert report.ok and full.ok and report.head == full.head == store.head_hash("r")
        assert (report.anchor_seq, report.events, full.anchor_seq) == (anchor, version, 0)
        walked = []
        real = store._chain_rows
        store._chain_rows = lambda run_id, after_seq=0: walked.append(after_seq) or real(
            run_id, after_seq
        )
        store.check_chain("r")
        assert walked == [anchor]


def _respace(url: str, seq: int, undo: bool = False) -> None:
    """Alter one stored payload's bytes so that it still decodes (a space after each ':')."""
    old, new = (": ", ":") if undo else (":", ": ")
    raw_sql(url, "UPDATE events SET payload = REPLACE(payload, :o, :n) "
            f"WHERE run_id = 'r' AND seq = {seq}", o=old, n=new)


def test_cheap_check_finds_tampering_after_the_anchor_and_verify_before_it(
    backend_url,
) -> None:
    version, anchor = _anchored_run(backend_url)
    _drop_triggers(backend_url)
    after, before = anchor + 2, 3
    _respace(backend_url, after)
    _respace(backend_url, before)
    with EventStore(backend_url) as store:
        tail = store.check_chain("r")
        assert tail.problem_seq == after and "differs from what was recorded" in tail.problem
        with pytest.raises(ChainBroken, match=f"seq {after} "):
            store.require_intact_chain("r")
        assert store.verify_chain("r").problem_seq == before
    # With the edit after the anchor undone, what the cheap check guarantees is kept (the
    # tail and the anchor event are intact) and only the full walk names seq 3.
    _respace(backend_url, after, undo=True)
    with EventStore(backend_url) as store:
        assert store.check_chain("r").ok
        full = store.verify_chain("r")
        assert full.problem_seq == before and "differs from what was recorded" in full.problem


def test_a_prefix_rewritten_with_its_hashes_recomputed_voids_the_anchor(backend_url) -> None:
    """Rehashing everything up to the anchor changes the anchor event's hash: the anchor is
    then ignored and the cheap check is the full walk, which names the first break."""
    version, anchor = _anchored_run(backend_url)
    _drop_triggers(backend_url)
    with EventStore(backend_url) as store:
        events = store.read("r")
    rows = raw_sql(backend_url, "SELECT seq, type, schema_version, payload FROM events "
                   "WHERE run_id = 'r' ORDER BY seq")
    prev = GENESIS
    for (seq, event_type, schema_version, payload), event in zip(rows, events, strict=True):
        if seq > anchor:
            break
        if seq == 2:
            payload = payload.replace('"pid":1', '"pid":7')
        digest = hashlib.sha256(event_bytes(
            "r", seq, event_type, schema_version, payload, time_text(event.recorded_at), prev
        )).hexdigest()
        raw_sql(backend_url, "UPDATE events SET payload = :p, prev_hash = :v, hash = :h "
                f"WHERE run_id = 'r' AND seq = {seq}", p=payload, v=prev, h=digest)
        prev = digest
    with EventStore(backend_url) as store:
        assert store.chain_anchor("r") is None
        report = store.check_chain("r")
        assert report.anchor_seq == 0
        assert report.problem == (
            f"seq {anchor} ({events[anchor - 1].type}) was rewritten: seq {anchor + 1} chains "
            "to a different hash"
        )


def test_a_forged_anchor_row_is_not_trusted(backend_url) -> None:
    version, anchor = _anchored_run(backend_url)
    raw_sql(backend_url, "UPDATE snapshots SET body = REPLACE(body, :a, :b) "
            "WHERE run_id = 'r' AND kind = 'chain'", a=f'"seq":{anchor}', b=f'"seq":{version}')
    with EventStore(backend_url) as store:
        assert store.chain_anchor("r") is None
        assert store.check_chain("r").anchor_seq == 0


def test_rebuild_snapshots_writes_an_anchor_only_over_an_intact_chain(backend_url) -> None:
    with EventStore(backend_url) as store:
        version = _run_with_episodes(store)
        assert store.chain_anchor("r") is None  # below the default interval
        store.rebuild_snapshots(["r"])
        assert store.chain_anchor("r").seq == version
    _drop_triggers(backend_url)
    _respace(backend_url, 4)
    with EventStore(backend_url) as store:
        # the anchor event itself is intact, so the cheap check trusts it (documented) ...
        assert store.check_chain("r").ok and store.chain_anchor("r").seq == version
        store.rebuild_snapshots(["r"])  # ... until a full walk finds the break: no anchor
        assert store.chain_anchor("r") is None
        assert store.check_chain("r").problem_seq == 4
