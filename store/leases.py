"""Leases: at most one live session drives a run, and only it can write.

Every acquisition increments the lease row's fencing ``token``. Renewals, appends (in the
same transaction as the events) and every other durable effect (``Lease.check`` right
before it) compare the holder's token with the row's, so a session that stalled past its
TTL and was taken over is refused with ``LeaseLost`` (a ``SessionLost``) the moment it
wakes up, whatever it was doing. Renewal runs on a heartbeat thread
(``Lease.start_heartbeat``), independent of how long one step of the work takes.

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

from domain.errors import SessionLost
from store.records import LeaseInfo

log = structlog.get_logger(__name__)


class LeaseLost(SessionLost):
    """This session's lease was released or taken over by another session: its fencing
    token is no longer the run's, so nothing it does may become durable."""


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
    """The error a fenced operation raises once ``holder`` (or nobody) has the run instead."""
    if holder is None or holder.released:
        who = f"run {lease.run_id!r} has no lease"
    else:
        who = held_message(holder)
    return LeaseLost(
        f"lease of {lease.owner!r} (token {lease.token}) was lost: {who}"
        + (f" (token {holder.token})" if holder is not None and not holder.released else "")
    )


def fenced_by(lease: Lease, row: LeaseInfo | None) -> bool:
    """True if ``row`` (the run's lease row now) still belongs to ``lease``."""
    return (
        row is not None and not row.released and row.token == lease.token
        and row.owner == lease.owner
    )


class LeaseBackend(Protocol):
    def _renew_lease(self, lease: Lease) -> datetime: ...

    def _release_lease(self, lease: Lease) -> None: ...

    def _check_lease(self, lease: Lease) -> None: ...


class Lease:
    """A held lease with its fencing ``token``. ``heartbeat`` extends it, ``check`` proves it
    is still ours (right before a durable effect), ``release`` frees it.

    Usable as a context manager (released on exit). ``start_heartbeat`` renews it from a
    daemon thread until ``release``; a loss seen there is kept in ``lost`` and raised by
    the next ``check``.
    """

    def __init__(
        self, backend: LeaseBackend, run_id: str, owner: str, pid: int, host: str, ttl_s: float,
        expires_at: datetime, taken_over: LeaseInfo | None = None, token: int = 0,
    ) -> None:
        self._backend = backend
        self.run_id = run_id
        self.owner = owner
        self.pid = pid
        self.host = host
        self.ttl_s = ttl_s
        self.expires_at = expires_at
        self.taken_over = taken_over
        self.token = token
        self.released = False
        self.lost: LeaseLost | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def tag(self) -> str:
        """``<owner>.<token>``: names this holder's temporary files, so a later session can
        tell whose they are (and whether their writer could still be alive)."""
        return f"{self.owner}.{self.token}"

    def heartbeat(self) -> None:
        """Extend the lease by its TTL; LeaseLost if another session owns it now."""
        self.expires_at = self._backend._renew_lease(self)

    def check(self) -> None:
        """Raise ``LeaseLost`` unless the store still names this lease (owner and token).

        A read of the lease row, not of local state: a process that was stopped past its TTL
        learns of the takeover here even before its heartbeat thread runs again.
        """
        if self.lost is not None:
            raise self.lost
        if self.released:
            raise LeaseLost(f"lease of {self.owner!r} on run {self.run_id!r} was released")
        try:
            self._backend._check_lease(self)
        except LeaseLost as exc:
            self.lost = exc
            raise

    def start_heartbeat(self, interval_s: float | None = None) -> None:
        """Renew every ``interval_s`` (default TTL/3) on a daemon thread until ``release``.

        A lost lease stops the thread (``lost`` is set); any other failure (a locked or
        unreachable database) is logged and retried at the next beat, since only the fencing
        token decides whether we still hold the run.
        """
        if self._thread is not None:
            return
        interval = interval_s if interval_s is not None else max(self.ttl_s / 3.0, 0.05)
        self._stop.clear()

        def beat() -> None:
            while not self._stop.wait(interval):
                try:
                    self.heartbeat()
                except LeaseLost as exc:
                    self.lost = exc
                    log.warning("lease_lost", run_id=self.run_id, owner=self.owner, error=str(exc))
                    return
                except Exception as exc:  # noqa: BLE001 - keep beating through hiccups
                    log.warning(
                        "lease_heartbeat_failed", run_id=self.run_id, owner=self.owner,
                        error_type=type(exc).__name__, error=str(exc),
                    )

        self._thread = threading.Thread(
            target=beat, name=f"assetcast-lease-{self.owner}", daemon=True
        )
        self._thread.start()

    def stop_heartbeat(self) -> None:
        thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(timeout=10.0)

    def release(self) -> None:
        """Stop the heartbeat and free the lease (a lost one is left to its new holder)."""
        self.stop_heartbeat()
        if not self.released:
            self.released = True
            if self.lost is None:
                self._backend._release_lease(self)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @contextmanager
    def keep_alive(self, interval_s: float | None = None) -> Iterator[Lease]:
        """Heartbeat every ``interval_s`` (default TTL/3) until the block exits.

        If the lease is lost meanwhile, the loss is raised when the block exits (the work
        inside cannot be interrupted safely from a thread).
        """
        self.start_heartbeat(interval_s)
        try:
            yield self
        finally:
            self.stop_heartbeat()
        if self.lost is not None:
            raise self.lost


def new_expiry(now: datetime, ttl_s: float) -> datetime:
    return now + timedelta(seconds=ttl_s)
