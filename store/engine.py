"""Engine construction: URL resolution and the SQLite durability settings.

Every SQLite connection gets WAL, ``synchronous=FULL`` and a busy timeout via a
connect listener, so an acknowledged append survives a killed writer no matter
which code path opened the connection. Python's sqlite3 module is switched to
autocommit so SQLAlchemy's ``begin`` emits the BEGIN itself; that lets writers ask
for ``BEGIN IMMEDIATE`` (``execution_options(sqlite_begin="IMMEDIATE")``) and take
the write lock before reading what they are about to change.
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

DEFAULT_URL = "sqlite:///assetcast.db"
BUSY_TIMEOUT_MS = 30_000


def resolve_url(url: str | None = None) -> str:
    """Explicit URL, else ``ASSETCAST_DB``, else ``assetcast.db`` in the working directory."""
    return url or os.environ.get("ASSETCAST_DB") or DEFAULT_URL


def safe_url(engine: Engine) -> str:
    """The engine URL without its password, for messages."""
    return engine.url.render_as_string(hide_password=True)


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
                cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = FULL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # type: ignore[no-untyped-def]
        mode = conn.get_execution_options().get("sqlite_begin", "")
        conn.exec_driver_sql(f"BEGIN {mode}".strip())
