"""Event store throughput and fold time, next to raw sqlite3 and eventsourcing.

Prints appends/s for durable 1-event and 50-event transactions through
``EventStore`` (SQLite, WAL, synchronous=FULL), raw ``sqlite3`` executemany into an
equivalent table with the same PRAGMAs, and the eventsourcing library's SQLite
aggregate recorder when it is installed (not a dependency: its row is skipped otherwise);
then the time to fold a ~100k-event run read from the store. The fenced row measures what
the lease-token check in every session append costs, side by side. The hash chain is priced
by the same store with its hashing switched off, transaction by transaction in alternation;
last, re-walking a large run's chain is timed against raw SHA-256 over the same bytes.
Goals: batched appends within 2x of raw sqlite3; hashing costs <= 5% of append throughput
(ratio >= 0.95); fold of 100k events < 2 s.
``--url URL`` (any SQLAlchemy URL) or ``--pg`` (a private durable PostgreSQL cluster)
instead compares EventStore on that database with EventStore on SQLite.

The baselines serialize payloads with the same canonical options as the store, through
an encoder bound once (the cheapest equivalent), so the ratio measures the store's own
overhead: validation, legality, the runs-row compare-and-swap and SQLAlchemy.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # repo root: tests.store.eventgen

from domain.chain import GENESIS, event_bytes, time_text, walk_chain  # noqa: E402
from store import EventStore  # noqa: E402
from tests.store.eventgen import (  # noqa: E402
    batch_started,
    collection_started,
    created,
    episode,
    legal_run,
    preparation,
)

ONE_TXNS = 500
BATCH_TXNS = 200
BATCH = 50

canonical_json = json.JSONEncoder(  # same bytes as domain.canonical.canonical_json
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode


def _episode_stream(start: int = 0):
    """An endless legal stream of episode events for batch 0."""
    e = start
    while True:
        yield from episode(0, e, accepted=e % 2 == 0)
        e += 1


def _setup_run(store: EventStore, run_id: str) -> int:
    return store.append(
        run_id, [created(run_id), *preparation(1), collection_started(), batch_started(0)],
        expected_version=0,
    )


class UnhashedEventStore(EventStore):
    """The store with the chain's hashing replaced by a constant: everything else equal."""

    def _link(self, run_id, prepared, previous, now) -> None:  # type: ignore[no-untyped-def]
        for event in prepared:
            event.prev_hash = event.hash = GENESIS


def bench_event_store(tmp: Path, per_txn: int, txns: int) -> float:
    return bench_event_store_url(f"sqlite:///{tmp / f'es_{per_txn}.db'}", per_txn, txns)


def bench_event_store_url(
    url: str, per_txn: int, txns: int, run_id: str = "r", *, fenced: bool = False
) -> float:
    store = EventStore(url)
    version = _setup_run(store, run_id)
    lease = store.acquire_lease(run_id, owner="bench", ttl_s=600) if fenced else None
    stream = _episode_stream()
    chunks = [[next(stream) for _ in range(per_txn)] for _ in range(txns)]
    t0 = time.perf_counter()
    for chunk in chunks:
        version = store.append(run_id, chunk, expected_version=version, fence=lease)
    elapsed = time.perf_counter() - t0
    if lease is not None:
        lease.release()
    store.close()
    return txns / elapsed


def bench_event_store_fenced(tmp: Path, per_txn: int, txns: int) -> float:
    """The same appends, each fenced by the session's lease (token checked in the append's
    transaction), as every session's appends are."""
    return bench_event_store_url(
        f"sqlite:///{tmp / f'esf_{per_txn}.db'}", per_txn, txns, fenced=True
    )


RAW_SCHEMA = """
CREATE TABLE events (
    position INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id VARCHAR(200) NOT NULL, seq INTEGER NOT NULL, type VARCHAR(64) NOT NULL,
    payload TEXT NOT NULL, recorded_at DATETIME NOT NULL, schema_version INTEGER NOT NULL,
    CONSTRAINT uq_events_run_seq UNIQUE (run_id, seq))
"""


def bench_raw_sqlite(tmp: Path, per_txn: int, txns: int) -> float:
    conn = sqlite3.connect(tmp / f"raw_{per_txn}.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute(RAW_SCHEMA)
    stream = _episode_stream()
    chunks = [[next(stream) for _ in range(per_txn)] for _ in range(txns)]
    seq = 0
    t0 = time.perf_counter()
    for chunk in chunks:
        rows = []
        for event in chunk:
            seq += 1
            rows.append(("r", seq, event.type, canonical_json(event.payload),
                         "2026-01-01 00:00:00", 1))
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO events (run_id, seq, type, payload, recorded_at, schema_version) "
            "VALUES (?, ?, ?, ?, ?, ?)", rows,
        )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return txns / elapsed


def bench_eventsourcing(tmp: Path, per_txn: int, txns: int) -> float:
    from eventsourcing.persistence import StoredEvent
    from eventsourcing.sqlite import SQLiteAggregateRecorder, SQLiteDatastore

    datastore = SQLiteDatastore(str(tmp / f"evs_{per_txn}.db"))
    recorder = SQLiteAggregateRecorder(datastore)
    recorder.create_table()
    originator = uuid.uuid4()
    stream = _episode_stream()
    chunks = [[next(stream) for _ in range(per_txn)] for _ in range(txns)]
    version = 0
    t0 = time.perf_counter()
    for chunk in chunks:
        stored = []
        for event in chunk:
            version += 1
            stored.append(StoredEvent(
                originator, version, event.type, canonical_json(event.payload).encode()
            ))
        recorder.insert_events(stored)
    elapsed = time.perf_counter() - t0
    datastore.close()
    return txns / elapsed


def bench_fold(tmp: Path, url: str | None = None) -> tuple[int, float, float, float]:
    url = url or f"sqlite:///{tmp / 'fold.db'}"
    store = EventStore(url)
    events = list(legal_run("big", batches=20, episodes=835))
    version = 0
    t0 = time.perf_counter()
    for i in range(0, len(events), 1000):
        version = store.append("big", events[i:i + 1000], expected_version=version)
    load = time.perf_counter() - t0
    store.close()
    fresh = EventStore(url)  # cold cache: everything is read back and folded
    t0 = time.perf_counter()
    state = fresh.state("big")
    fold_s = time.perf_counter() - t0
    assert state.state == "completed" and state.version == len(events)
    t0 = time.perf_counter()
    fresh.read("big")
    read_s = time.perf_counter() - t0
    fresh.close()
    return len(events), load, fold_s, read_s


ROUNDS = 5


def _measure(
    impls: dict[str, Callable[[Path, int, int], float]], tmp: Path
) -> dict[str, tuple[float, float]]:
    """Interleave implementations over several rounds and keep each one's median, so
    a burst of disk contention from other processes does not favour one of them."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in impls}
    for r in range(ROUNDS):
        for name, fn in impls.items():
            sub = tmp / f"{name.split()[0]}_{r}"
            sub.mkdir()
            samples[name].append((fn(sub, 1, ONE_TXNS), fn(sub, BATCH, BATCH_TXNS)))
    return {
        name: (
            sorted(s[0] for s in got)[len(got) // 2], sorted(s[1] for s in got)[len(got) // 2]
        )
        for name, got in samples.items()
    }


def main_url(url: str | None) -> None:
    """EventStore on another database (``--url URL``, or ``--pg``: a private durable
    PostgreSQL cluster from tests/pg_support.py) next to EventStore on SQLite."""
    from contextlib import ExitStack

    from tests.pg_support import fresh_schema, local_cluster

    with tempfile.TemporaryDirectory() as d, ExitStack() as stack:
        if url is None:
            url = stack.enter_context(local_cluster(durable=True)).url
            print("PostgreSQL: private cluster, fsync=on, synchronous_commit=on")
        if url.startswith("postgresql"):
            url = stack.enter_context(fresh_schema(url))
        tmp = Path(d)
        print(f"{'':<26}{'1-event tx/s':>13}{f'{BATCH}-event tx/s':>15}{'events/s':>12}")
        for name, make in (
            ("EventStore SQLite", lambda i, n: f"sqlite:///{tmp / f'u{i}_{n}.db'}"),
            (f"EventStore {sa_dialect(url)}", lambda i, n: url),
        ):
            rows = [(bench_event_store_url(make(i, 1), 1, ONE_TXNS, f"one{i}"),
                     bench_event_store_url(make(i, BATCH), BATCH, BATCH_TXNS, f"many{i}"))
                    for i in range(3)]
            one = sorted(r[0] for r in rows)[1]
            many = sorted(r[1] for r in rows)[1]
            print(f"{name:<26}{one:>13.0f}{many:>15.0f}{many * BATCH:>12.0f}")
        n, load, fold_s, read_s = bench_fold(tmp, url)
        print(f"{sa_dialect(url)}: fold of a {n}-event run (cold cache) {fold_s:.2f} s; "
              f"read() {read_s:.2f} s; loading it in 1000-event appends {load:.2f} s")


def sa_dialect(url: str) -> str:
    return url.split(":", 1)[0].split("+", 1)[0]


def bench_hashing_ratio(tmp: Path, per_txn: int, txns: int) -> float:
    """Throughput with hashing / without, measured transaction by transaction in
    alternation (two stores, two files, one process), so disk and CPU contention from
    other processes hits both sides alike; >1 means hashing was not measurably slower."""
    stores = {
        name: cls(f"sqlite:///{tmp / f'alt_{name}_{per_txn}.db'}")
        for name, cls in (("hashed", EventStore), ("plain", UnhashedEventStore))
    }
    versions = {name: _setup_run(store, "r") for name, store in stores.items()}
    stream = _episode_stream()
    chunks = [[next(stream) for _ in range(per_txn)] for _ in range(txns)]
    spent = dict.fromkeys(stores, 0.0)
    for i, chunk in enumerate(chunks):
        order = ("hashed", "plain") if i % 2 else ("plain", "hashed")
        for name in order:
            t0 = time.perf_counter()
            versions[name] = stores[name].append("r", chunk, expected_version=versions[name])
            spent[name] += time.perf_counter() - t0
    for store in stores.values():
        store.close()
    return spent["plain"] / spent["hashed"]


VERIFY_EVENTS = 1_000_000
VERIFY_BUDGET_S = 120.0


def bench_verify(tmp: Path) -> None:
    """Re-walk a large run's chain: through the store (read + walk) and the walk alone over
    rows in memory, next to raw SHA-256 of the same bytes. 1M events if building and
    walking them fits the budget, judged from a 200k-event run; else 200k, extrapolated."""
    import hashlib

    def build(n_batches: int) -> tuple[EventStore, str, float]:
        url = f"sqlite:///{tmp / f'chain_{n_batches}.db'}"
        store = EventStore(url)
        run_id = f"chain{n_batches}"
        events = legal_run(run_id, batches=n_batches, episodes=835)
        version, chunk, t0 = 0, [], time.perf_counter()
        for event in events:
            chunk.append(event)
            if len(chunk) == 5000:
                version = store.append(run_id, chunk, expected_version=version)
                chunk = []
        if chunk:
            store.append(run_id, chunk, expected_version=version)
        return store, run_id, time.perf_counter() - t0

    def measure(store: EventStore, run_id: str) -> tuple[int, float, float, float]:
        t0 = time.perf_counter()
        report = store.verify_chain(run_id)
        store_s = time.perf_counter() - t0
        assert report.ok, report.summary()
        rows, version, head = store._chain_rows(run_id)
        t0 = time.perf_counter()
        walk_chain(run_id, rows, stored_head=head, stored_version=version)
        walk_s = time.perf_counter() - t0
        at = {r[4]: time_text(r[4]) for r in rows}
        data = [event_bytes(run_id, r[0], r[1], r[2], r[3], at[r[4]], r[5] or "") for r in rows]
        sha = hashlib.sha256
        t0 = time.perf_counter()
        for d in data:
            sha(d).digest()
        raw_s = time.perf_counter() - t0
        return len(rows), store_s, walk_s, raw_s

    section_t0 = time.perf_counter()
    store, run_id, build_s = build(40)  # ~200k events
    n, store_s, walk_s, raw_s = measure(store, run_id)
    store.close()
    scale = VERIFY_EVENTS / n
    if (time.perf_counter() - section_t0) * scale < VERIFY_BUDGET_S:
        store, run_id, build_s = build(200)
        n, store_s, walk_s, raw_s = measure(store, run_id)
        store.close()
        note = "measured"
    else:
        note = f"measured on {n} events, extrapolated x{scale:.1f} (1M would exceed ~2 min)"
        n, store_s, walk_s, raw_s = (
            VERIFY_EVENTS, store_s * scale, walk_s * scale, raw_s * scale
        )
    print(f"verify of a {n}-event chain ({note}): store.verify_chain {store_s:.2f} s "
          f"({n / store_s:.0f} events/s, reading rows included); walk alone {walk_s:.2f} s "
          f"({n / walk_s:.0f} events/s); raw sha256 over the same bytes {raw_s:.2f} s "
          f"({n / raw_s:.0f} events/s): walk/raw {raw_s / walk_s:.2f}x; this section took "
          f"{time.perf_counter() - section_t0:.0f} s")


def main() -> None:
    if "--pg" in sys.argv[1:]:
        main_url(None)
        return
    if "--url" in sys.argv[1:]:
        main_url(sys.argv[sys.argv.index("--url") + 1])
        return
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        impls = {
            "assetcast EventStore": bench_event_store,
            "EventStore, fenced append": bench_event_store_fenced,
            "raw sqlite3 executemany": bench_raw_sqlite,
        }
        if importlib.util.find_spec("eventsourcing") is not None:
            impls["eventsourcing SQLite"] = bench_eventsourcing
        else:
            print("eventsourcing is not installed: its row is skipped")
        results = _measure(impls, tmp)
        print(f"durable appends (WAL, synchronous=FULL), median of {ROUNDS} interleaved rounds")
        print(f"{'':<26}{'1-event tx/s':>13}{f'{BATCH}-event tx/s':>15}{'events/s':>12}")
        for name, (one, many) in results.items():
            print(f"{name:<26}{one:>13.0f}{many:>15.0f}{many * BATCH:>12.0f}")
        es, raw = results["assetcast EventStore"], results["raw sqlite3 executemany"]
        print(f"EventStore / raw sqlite3: 1-event {es[0] / raw[0]:.2f}x, "
              f"{BATCH}-event {es[1] / raw[1]:.2f}x (goal for batched: >= 0.5x)")
        fenced = results["EventStore, fenced append"]
        print(f"fencing check (lease token in the append's transaction) / unfenced: "
              f"1-event {fenced[0] / es[0]:.2f}x, {BATCH}-event {fenced[1] / es[1]:.2f}x")
        one = bench_hashing_ratio(tmp, 1, 2 * ONE_TXNS)
        many = bench_hashing_ratio(tmp, BATCH, 2 * BATCH_TXNS)
        print(f"hash chain: with hashing / without, alternating transaction by transaction "
              f"(same process): 1-event {one:.3f}x, {BATCH}-event {many:.3f}x (goal >= 0.95x)")
        n, load, fold_s, read_s = bench_fold(tmp)
        print(f"fold of a {n}-event run read from the store (cold cache): {fold_s:.2f} s "
              f"(goal < 2 s); read() with RecordedEvent objects: {read_s:.2f} s; "
              f"loading it in 1000-event appends took {load:.2f} s")
        bench_verify(tmp)


if __name__ == "__main__":
    main()
