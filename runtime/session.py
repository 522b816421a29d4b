"""A session: who is driving a run right now, proven by a live, fenced lease.

Preparation and collection sessions are the same kind of object (:class:`Session`): they name
themselves the same way (:func:`new_session_id`, :func:`session_identity`), hold the run's
lease for the same TTL and renew it from the same daemon heartbeat thread, so how long one
step of the work takes (a huge mesh, a slow episode) never decides whether the lease expires.

The lease carries a fencing token that grows with every takeover. Every durable effect of a
session is fenced by it: appends check it in their own transaction (``fence=session.lease``),
and every file a session publishes (a cache snapshot, a deployment, a trajectory, a report)
is preceded by :meth:`Session.check`, a read of the lease row. A session that stalled past
its TTL (SIGSTOP, a swapped-out VM) and was taken over therefore stops with ``SessionLost``
at its next effect and publishes nothing. The TTL and heartbeat interval come from
``ASSETCAST_LEASE_TTL_S`` / ``ASSETCAST_LEASE_HEARTBEAT_S`` (tests shorten them).

A process killed with SIGKILL never releases: its lease expires (or the store recognises the
dead pid) and a later `resume` takes over.
"""

from __future__ import annotations

import math
import os
import secrets
import socket
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import structlog

from domain.errors import AssetcastInputError, SessionLost
from store.leases import pid_alive, this_host

log = structlog.get_logger(__name__)

LEASE_TTL_S = 30.0
TTL_ENV = "ASSETCAST_LEASE_TTL_S"
HEARTBEAT_ENV = "ASSETCAST_LEASE_HEARTBEAT_S"

__all__ = ["LEASE_TTL_S", "CollectorSession", "LeaseTiming", "Session", "SessionLost"]


@dataclass(frozen=True)
class LeaseTiming:
    """How long a lease lives without renewal, and how often the heartbeat renews it.

    The heartbeat must come well inside the TTL (at most half of it), or one late beat would
    hand the run to another session while this one is healthy.
    """

    ttl_s: float = LEASE_TTL_S
    heartbeat_s: float = LEASE_TTL_S / 3.0

    @classmethod
    def resolve(cls, ttl_s: float | None = None, heartbeat_s: float | None = None) -> LeaseTiming:
        """Explicit values, else the environment, else the defaults (heartbeat = TTL/3)."""
        ttl = ttl_s if ttl_s is not None else _env_seconds(TTL_ENV, LEASE_TTL_S)
        beat = heartbeat_s if heartbeat_s is not None else _env_seconds(HEARTBEAT_ENV, ttl / 3.0)
        if not beat <= ttl / 2.0:
            raise AssetcastInputError(
                f"{HEARTBEAT_ENV}: heartbeat {beat:g} s must be at most half the lease TTL "
                f"{ttl:g} s"
            )
        return cls(ttl, beat)


def _env_seconds(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise AssetcastInputError(f"{name}: expected a positive number of seconds, got {raw!r}")
    return value


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


class Session:
    """A held, heartbeating lease plus the identity recorded in the events that start a
    session (`PreparationStarted`, `CollectionStarted`, `RunResumed`)."""

    def __init__(self, run_id: str, session_id: str, lease: Any, timing: LeaseTiming) -> None:
        self.run_id = run_id
        self.session_id = session_id
        self.lease = lease
        self.timing = timing
        self.ttl_s = timing.ttl_s

    @classmethod
    def open(
        cls, store: Any, run_id: str, *, ttl_s: float | None = None,
        heartbeat_s: float | None = None,
    ) -> Session:
        """Acquire the run's lease (``LeaseHeld`` names the live holder) and start heartbeats."""
        timing = LeaseTiming.resolve(ttl_s, heartbeat_s)
        session_id = new_session_id()
        lease = store.acquire_lease(run_id, owner=session_id, ttl_s=timing.ttl_s)
        lease.start_heartbeat(timing.heartbeat_s)
        log.debug(
            "session_opened", run_id=run_id, session_id=session_id, token=lease.token,
            ttl_s=timing.ttl_s, heartbeat_s=timing.heartbeat_s,
        )
        return cls(run_id, session_id, lease, timing)

    @property
    def token(self) -> int:
        return int(self.lease.token)

    @property
    def tag(self) -> str:
        """``<session_id>.<token>``: the name part of every temporary file of this session."""
        return f"{self.session_id}.{self.token}"

    @property
    def lost(self) -> BaseException | None:
        """The loss the heartbeat (or a check) saw, if any."""
        return None if self.lease is None else self.lease.lost

    def identity(self) -> dict[str, Any]:
        """This session's :func:`session_identity`."""
        return session_identity(self.session_id)

    def raise_if_lost(self) -> None:
        """Raise the loss the heartbeat already saw (no store access)."""
        if self.lost is not None:
            raise self.lost

    def check(self) -> None:
        """``SessionLost`` unless the store still names this session's lease and token; the
        fence in front of every file this session publishes."""
        if self.lease is None:
            raise SessionLost(f"run {self.run_id}: session {self.session_id} is closed")
        self.lease.check()

    def close(self) -> None:
        """Stop the heartbeat and release the lease (idempotent; a lost lease is left alone)."""
        if self.lease is not None:
            lease, self.lease = self.lease, None
            lease.release()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


CollectorSession = Session


def session_hosts(events: Iterable[Any]) -> dict[str, tuple[str, int]]:
    """``session_id -> (host, pid)`` of every session the log names."""
    found: dict[str, tuple[str, int]] = {}
    for event in events:
        payload = event.payload
        if event.type in ("PreparationStarted", "CollectionStarted", "RunResumed"):
            found[str(payload["session_id"])] = (str(payload["host"]), int(payload["pid"]))
        elif event.type == "LeaseTakenOver":
            found.setdefault(
                str(payload["previous_owner"]),
                (str(payload["previous_host"]), int(payload["previous_pid"])),
            )
    return found


def provably_dead(session_id: str, hosts: dict[str, tuple[str, int]], own: str) -> bool:
    """True only if ``session_id``'s process cannot be running: it is this session, or it ran
    on this host and its pid is gone. Unknown sessions and other hosts are presumed alive, so
    their temporary files are left alone (a stalled writer may still be using them)."""
    if session_id == own:
        return True
    where = hosts.get(session_id)
    if where is None:
        return False
    host, pid = where
    return host == this_host() and not pid_alive(pid)
