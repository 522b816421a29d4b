"""Leases: at most one live session drives a run.

A lease is live until it expires. On the lease's own host a holder whose process is
gone (or a zombie) is treated as dead at once, so a crashed session can be resumed
without waiting for the TTL; on another host only expiry frees it, because the pid
cannot be checked there.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Protocol

import structlog

from domain.errors import LeaseHeld
from store.records import LeaseInfo

log = structlog.get_logger(__name__)


class LeaseLost(LeaseHeld):
    """This session's lease was released or taken over by another session."""


def this_host() -> str:
    return socket.gethostname()


def pid_alive(pid: int) -> bool:
    """True if ``pid`` names a running (non-zombie) process on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def is_live(lease: LeaseInfo, now: datetime, host: str) -> bool:
    """Unexpired, and (if held on ``host``, where its pid can be checked) its process runs."""
    if lease.expires_at <= now:
        return False
    if lease.host == host and not pid_alive(lease.pid):
        return False
    return True


def held_message(lease: LeaseInfo) -> str:
    return (
        f"run {lease.run_id!r} is held by {lease.describe()} until "
        f"{lease.expires_at.isoformat(timespec='seconds')}"
    )


def lease_lost(lease: Lease, holder: LeaseInfo | None) -> LeaseLost:
    """The error a renewal raises once ``holder`` (or nobody) has the run instead."""
    who = held_message(holder) if holder else f"run {lease.run_id!r} has no lease"
    return LeaseLost(f"lease of {lease.owner!r} was lost: {who}")


class LeaseBackend(Protocol):
    def _renew_lease(self, lease: Lease) -> datetime: ...

    def _release_lease(self, lease: Lease) -> None: ...


class Lease:
    """A held lease. ``heartbeat`` extends it; ``release`` frees it.

    Usable as a context manager (released on exit); ``keep_alive`` runs heartbeats
    on a daemon thread for long phases.
    """

    def __init__(
        self, backend: LeaseBackend, run_id: str, owner: str, pid: int, host: str, ttl_s: float,
        expires_at: datetime, taken_over: LeaseInfo | None = None,
    ) -> None:
        self._backend = backend
        self.run_id = run_id
        self.owner = owner
        self.pid = pid
        self.host = host
        self.ttl_s = ttl_s
        self.expires_at = expires_at
        self.taken_over = taken_over
        self.released = False
        self.lost: LeaseLost | None = None

    def heartbeat(self) -> None:
        """Extend the lease by its TTL; LeaseLost if another session owns it now."""
        self.expires_at = self._backend._renew_lease(self)

    def release(self) -> None:
        if not self.released:
            self._backend._release_lease(self)
            self.released = True

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @contextmanager
    def keep_alive(self, interval_s: float | None = None) -> Iterator[Lease]:
        """Heartbeat every ``interval_s`` (default TTL/3) until the block exits.

        If the lease is lost meanwhile, the thread stops and the loss is raised when
        the block exits (the work inside cannot be interrupted safely from a thread).
        """
        interval = interval_s if interval_s is not None else max(self.ttl_s / 3.0, 0.05)
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(interval):
                try:
                    self.heartbeat()
                except LeaseLost as exc:
                    self.lost = exc
                    log.warning("lease_lost", run_id=self.run_id, error=str(exc))
                    return
                except Exception as exc:  # noqa: BLE001 - keep beating through hiccups
                    log.warning("lease_heartbeat_failed", run_id=self.run_id, error=str(exc))

        thread = threading.Thread(target=beat, name=f"lease-{self.run_id}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
        if self.lost is not None:
            raise self.lost


def new_expiry(now: datetime, ttl_s: float) -> datetime:
    return now + timedelta(seconds=ttl_s)
