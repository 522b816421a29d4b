"""Subprocess for lease tests: ``python -m tests.store.lease_worker URL RUN OWNER START_AT``.

Waits until START_AT (epoch seconds) so racers start together, tries to take the lease,
prints ``WON`` or ``HELD <message>``, and if it won sleeps until killed.
"""

from __future__ import annotations

import sys
import time

from domain.errors import LeaseHeld
from store import EventStore


def main(url: str, run_id: str, owner: str, start_at: float) -> None:
    store = EventStore(url)
    time.sleep(max(0.0, start_at - time.time()))
    try:
        store.acquire_lease(run_id, owner=owner, ttl_s=60.0)
    except LeaseHeld as exc:
        print(f"HELD {exc}", flush=True)
        return
    print("WON", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
