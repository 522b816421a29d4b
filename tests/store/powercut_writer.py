"""Subprocess for the power-cut test: appends forever, printing ``version wal_bytes`` per ack.

Automatic checkpoints are off, so the WAL only grows and its length right after an
acknowledged commit marks what that commit fsynced; everything past it is what a power
cut may lose or tear. Odd episodes go event by event, even ones as one 6-event append.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sqlalchemy import event

from store import EventStore
from store.engine import make_engine
from tests.store.eventgen import batch_started, collection_started, created, episode, preparation


def main(url: str, run_id: str) -> None:
    engine = make_engine(url)

    @event.listens_for(engine, "connect")
    def _no_checkpoints(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.execute("PRAGMA wal_autocheckpoint = 0")

    store = EventStore(engine=engine)
    wal = Path(f"{engine.url.database}-wal")

    def ack(version: int) -> None:
        print(version, wal.stat().st_size, flush=True)

    version = store.append(
        run_id, [created(run_id), *preparation(1), collection_started(), batch_started(0)],
        expected_version=0,
    )
    ack(version)
    e = 0
    while True:
        events = episode(0, e, accepted=e % 2 == 0)
        if e % 2:
            for one in events:
                version = store.append(run_id, [one], expected_version=version)
                ack(version)
        else:
            version = store.append(run_id, events, expected_version=version)
            ack(version)
        e += 1


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
