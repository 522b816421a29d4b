"""A session: who is driving a run right now, proven by a live lease.

Preparation and collection sessions name themselves the same way (:func:`new_session_id`,
:func:`session_identity`) and hold the lease for the same default TTL, so forensics can
compare them; this module is the one place those choices live.

At most one process may append collection events to a run. A session takes the run's lease
before it reads the log to plan its work (so two `collect`/`resume` calls cannot both plan
from the same version), keeps the lease alive from a daemon heartbeat thread while the
simulator runs, and releases it at the end. A process killed with SIGKILL never releases:
its lease expires (or the store recognises the dead pid) and a later `resume` takes over.

If the heartbeat ever fails (the lease was taken over because this process stalled past its
TTL), the session is *lost*; :meth:`CollectorSession.check` raises so that the collector stops
before appending anything else under a lease it no longer holds.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any

import structlog

from domain.errors import StoreError

log = structlog.get_logger(__name__)

LEASE_TTL_S = 30.0


class SessionLost(StoreError):
    """The session's lease could not be renewed; another session may now own the run."""


def new_session_id() -> str:
    """Twelve hex characters, unique enough to name a session and its recording folder."""
    return secrets.token_hex(6)


def session_identity(session_id: str) -> dict[str, Any]:
    """Who is driving the run (``session_id``, ``host``, ``pid``), as recorded in the events
    that start a session: lets forensics tell sessions apart and spot a crashed one."""
    return {"session_id": session_id, "host": socket.gethostname(), "pid": os.getpid()}


def run_failed_payload(
    phase: str,
    error: BaseException,
    *,
    cause: BaseException | None = None,
    batch_index: int | None = None,
    episode_index: int | None = None,
) -> dict[str, Any]:
    """The ``RunFailed`` a session appends before its error propagates: the phase and
    position it reached, what failed (``cause``, by default ``error`` itself) and the full
    traceback of ``error``, so forensics can tell the story without the process."""
    shown = error if cause is None else cause
    return {
        "phase": phase,
        "error_type": type(shown).__name__,
        "detail": str(shown),
        "traceback": "".join(traceback.format_exception(error)),
        "batch_index": batch_index,
        "episode_index": episode_index,
    }


@dataclass
class CollectorSession:
    """A held lease plus the identity recorded in `CollectionStarted`/`RunResumed`."""

    run_id: str
    session_id: str
    lease: Any
    ttl_s: float
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lost: BaseException | None = None

    @classmethod
    def open(cls, store: Any, run_id: str, *, ttl_s: float = LEASE_TTL_S) -> CollectorSession:
        """Acquire the run's lease (``LeaseHeld`` names the live holder) and start heartbeats."""
        session_id = new_session_id()
        lease = store.acquire_lease(run_id, owner=session_id, ttl_s=ttl_s)
        session = cls(run_id=run_id, session_id=session_id, lease=lease, ttl_s=ttl_s)
        session._start_heartbeat()
        log.debug("session_opened", run_id=run_id, session_id=session_id)
        return session

    def identity(self) -> dict[str, Any]:
        """This session's :func:`session_identity`."""
        return session_identity(self.session_id)

    def _start_heartbeat(self) -> None:
        interval = max(self.ttl_s / 3.0, 0.05)

        def beat() -> None:
            while not self._stop.wait(interval):
                try:
                    self.lease.heartbeat()
                except BaseException as error:  # the main thread decides what to do
                    self._lost = error
                    log.error(
                        "lease_heartbeat_failed",
                        run_id=self.run_id,
                        session_id=self.session_id,
                        error_type=type(error).__name__,
                        detail=str(error),
                    )
                    return

        self._thread = threading.Thread(
            target=beat, name=f"assetcast-lease-{self.session_id}", daemon=True
        )
        self._thread.start()

    def check(self) -> None:
        """Raise if the lease was lost; called before each append of collection events."""
        if self._lost is not None:
            raise SessionLost(
                f"run {self.run_id}: session {self.session_id} lost its lease: {self._lost}"
            ) from self._lost

    def close(self) -> None:
        """Stop the heartbeat and release the lease (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        if self.lease is not None:
            lease, self.lease = self.lease, None
            if self._lost is None:
                lease.release()

    def __enter__(self) -> CollectorSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
