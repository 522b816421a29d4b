"""Which event store a command uses, and opening it so that a typo is bad input (exit 2)
rather than a fresh empty database or an empty report."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from domain.errors import UnknownRun
from runtime.cli.exit_codes import UsageError

DB_ENV = "ASSETCAST_DB"


def default_db_url() -> str:
    """``ASSETCAST_DB`` or ``assetcast.db`` in the working directory."""
    return os.environ.get(DB_ENV) or f"sqlite:///{Path.cwd() / 'assetcast.db'}"


def db_url(args: argparse.Namespace) -> str:
    return getattr(args, "db", None) or default_db_url()


def missing_sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names, if it does not exist yet (other backends: None)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError(f"--db {url!r}: not a database URL") from None
    database = parsed.database
    if not parsed.drivername.startswith("sqlite") or database in (None, "", ":memory:"):
        return None
    if database.startswith("file:"):
        return None
    path = Path(database)
    return None if path.exists() else path


def open_store(url: str, *, create: bool = False) -> Any:
    """Open the event store; only commands that record runs may create a new database, so a
    mistyped ``--db`` on a query is reported instead of leaving an empty file behind."""
    from store.event_store import EventStore

    if not create and (missing := missing_sqlite_file(url)) is not None:
        raise UsageError(f"--db {url}: no database at {missing} (nothing recorded there yet)")
    return EventStore(url)


def _unknown_run(run_id: str) -> UnknownRun:
    return UnknownRun(f"unknown run {run_id!r} (use `assetcast runs` to list runs)")


def read_run(store: Any, run_id: str, *, chain_notice: bool = True) -> list[Any]:
    """The run's events; an unknown run is bad input (exit 2), never an empty report.

    A broken hash chain is announced on stderr first (``chain_notice``)."""
    if chain_notice:
        from runtime.cli.chain_notice import warn_if_chain_broken

        warn_if_chain_broken(store, run_id)
    try:
        events = list(store.read(run_id))
    except UnknownRun:
        events = []
    if not events:
        raise _unknown_run(run_id)
    return events


def require_run(store: Any, run_id: str) -> None:
    """Refuse an unknown run as :func:`read_run` does, for commands that do not need its
    events here: the store's cached fold answers without reading the whole log, which the
    command would otherwise read twice."""
    try:
        store.state(run_id)
    except UnknownRun:
        raise _unknown_run(run_id) from None
