"""Engine construction: URL resolution, the SQLite durability settings, driver errors.

Every SQLite connection gets WAL, ``synchronous=FULL`` and a busy timeout via a
connect listener, so an acknowledged append survives a killed writer no matter
which code path opened the connection. Python's sqlite3 module is switched to
autocommit so SQLAlchemy's ``begin`` emits the BEGIN itself; that lets writers ask
for ``BEGIN IMMEDIATE`` (``execution_options(sqlite_begin="IMMEDIATE")``) and take
the write lock before reading what they are about to change. Other dialects ignore
that option and keep their defaults (PostgreSQL: READ COMMITTED, where the store's
compare-and-swap UPDATE waits on a concurrent writer's row lock and then re-checks).
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

DEFAULT_URL = "sqlite:///assetcast.db"
BUSY_TIMEOUT_MS = 30_000
# SQLSTATEs meaning "a concurrent transaction won": serialization failure, deadlock.
_CONFLICT_SQLSTATES = frozenset({"40001", "40P01"})


def resolve_url(url: str | None = None) -> str:
    """Explicit URL, else ``ASSETCAST_DB``, else ``assetcast.db`` in the working directory."""
    return url or os.environ.get("ASSETCAST_DB") or DEFAULT_URL


def safe_url(engine: Engine) -> str:
    """The engine URL without its password, for messages."""
    return engine.url.render_as_string(hide_password=True)


def is_write_conflict(exc: DBAPIError) -> bool:
    """True if the driver error says a concurrent transaction got there first.

    Under REPEATABLE READ or SERIALIZABLE, PostgreSQL reports a lost race on the runs
    row as a serialization failure instead of letting the conditional UPDATE match no
    row; either way the caller lost the optimistic-concurrency race.
    """
    orig = exc.orig
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return code in _CONFLICT_SQLSTATES


def make_engine(url: str | None = None) -> Engine:
    engine = sa.create_engine(resolve_url(url))
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine)
    return engine


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if engine.url.database not in (None, "", ":memory:"):
                _enable_wal(cursor)
            cursor.execute("PRAGMA synchronous = FULL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # type: ignore[no-untyped-def]
        mode = conn.get_execution_options().get("sqlite_begin", "")
        conn.exec_driver_sql(f"BEGIN {mode}".strip())


def _enable_wal(cursor: Any) -> None:
    """Switch the file to WAL, waiting out other processes doing the same.

    Changing the journal mode needs an exclusive lock, and SQLite reports "database is
    locked" at once instead of calling the busy handler; several processes opening a new
    database together (a collector and a resume racing) would fail without this loop.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.002
    while True:
        try:
            row = cursor.execute("PRAGMA journal_mode = WAL").fetchone()
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
        else:
            if row is not None and str(row[0]).lower() == "wal":
                return
            if time.monotonic() > deadline:
                raise sqlite3.OperationalError(
                    f"could not switch the database to WAL (journal mode {row[0] if row else None})"
                )
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
