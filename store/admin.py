"""Schema administration: upgrade a database to the newest revision, report the current one.

The Alembic scripts are located relative to the installed ``migrations`` package, so
this works from any working directory and from an installed wheel.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine

import migrations
from store.engine import make_engine, resolve_url

# PostgreSQL advisory lock key serializing schema upgrades (ASCII "astcast").
_UPGRADE_LOCK_KEY = 0x61737463617374


def alembic_config(url: str | None = None) -> Config:
    """An Alembic Config built in code (no alembic.ini or CWD needed)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).resolve().parent))
    cfg.set_main_option("sqlalchemy.url", resolve_url(url).replace("%", "%%"))
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "migrations/versions holds no revision"
    return head


def _current(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


def _lock_schema(conn: Connection) -> None:
    """Serialize concurrent upgrades: SQLite already holds the write lock (BEGIN
    IMMEDIATE); PostgreSQL takes a transaction-scoped advisory lock, since two
    transactions creating the same tables would otherwise fail on catalog conflicts."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _UPGRADE_LOCK_KEY})


def upgrade_engine(engine: Engine) -> str:
    """Upgrade to head under the write lock, so concurrent openers do not race."""
    head = head_revision()
    with engine.connect() as conn:
        conn.execution_options(sqlite_begin="IMMEDIATE")
        with conn.begin():
            _lock_schema(conn)
            if _current(conn) == head:
                return head
            cfg = alembic_config(str(engine.url))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    return head


def ensure_schema(engine: Engine) -> None:
    """Cheap check first (a read), upgrade only when the database is behind."""
    with engine.connect() as conn:
        current = _current(conn)
    if current != head_revision():
        upgrade_engine(engine)


def upgrade(url: str | None = None) -> str:
    """Upgrade the database at ``url`` to head; return the revision it is now at."""
    engine = make_engine(url)
    try:
        return upgrade_engine(engine)
    finally:
        engine.dispose()


def current(url: str | None = None) -> str | None:
    """The revision the database at ``url`` is at, or None if it was never upgraded."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table("alembic_version"):
                return None
            return _current(conn)
    finally:
        engine.dispose()
