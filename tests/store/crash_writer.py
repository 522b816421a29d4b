"""Subprocess for the crash test: appends episodes forever, printing each acknowledged seq.

Run as ``python -m tests.store.crash_writer URL RUN_ID``. Every (re)start resumes the
run like a real session would: a RunResumed opens a new session, the unfinished
episode (if any) is restarted, and collection continues. Odd episodes are appended
event by event, even ones as one 6-event transaction, so a kill can land inside
either kind of append.
"""

from __future__ import annotations

import sys

from store import EventStore, NewEvent
from tests.store.eventgen import batch_started, collection_started, created, episode, preparation


def main(url: str, run_id: str) -> None:
    store = EventStore(url)
    try:
        state = store.state(run_id)
        version = store.append(run_id, [NewEvent("RunResumed", {
            "session_id": "again", "host": "h", "pid": 1, "from_state": state.state,
            "to_state": state.state,
        })], expected_version=state.version)
    except Exception as exc:  # noqa: BLE001 - first start: the run does not exist yet
        if type(exc).__name__ != "UnknownRun":
            raise
        version = store.append(
            run_id, [created(run_id), *preparation(1), collection_started(), batch_started(0)],
            expected_version=0,
        )
    print(version, flush=True)
    state = store.state(run_id)
    e = sum(1 for ep in state.episodes.values() if ep.done)
    while True:
        events = episode(0, e, accepted=e % 2 == 0)
        if e % 2:
            for event in events:
                version = store.append(run_id, [event], expected_version=version)
                print(version, flush=True)
        else:
            version = store.append(run_id, events, expected_version=version)
            print(version, flush=True)
        e += 1


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
