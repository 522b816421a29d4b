"""Schema administration: upgrade a database to the newest revision, report the current one.

The Alembic scripts are located relative to the installed ``migrations`` package, so
this works from any working directory and from an installed wheel.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

import migrations
from store.engine import make_engine, resolve_url

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic (and Mako, Pygments behind it) costs a read-only command most of its start-up,
# so it is imported only to upgrade; checking the revision needs neither.
_REVISION = re.compile(r'^(down_revision|revision)\s*(?::[^=]*)?=\s*["\']?([\w.-]+|None)["\']?',
                       re.MULTILINE)

# PostgreSQL advisory lock key serializing schema upgrades (ASCII "astcast").
_UPGRADE_LOCK_KEY = 0x61737463617374


def alembic_config(url: str | None = None) -> Config:
    """An Alembic Config built in code (no alembic.ini or CWD needed)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).resolve().parent))
    cfg.set_main_option("sqlalchemy.url", resolve_url(url).replace("%", "%%"))
    return cfg


@cache
def head_revision() -> str:
    """The newest revision, read from the revision files' ``revision``/``down_revision``
    lines (a test checks this agrees with Alembic's own answer)."""
    revisions: dict[str, str | None] = {}
    for path in sorted((Path(migrations.__file__).resolve().parent / "versions").glob("*.py")):
        found = dict((k, v) for k, v in _REVISION.findall(path.read_text(encoding="utf-8")))
        if "revision" in found:
            down = found.get("down_revision")
            revisions[found["revision"]] = None if down in (None, "None") else down
    heads = set(revisions) - {down for down in revisions.values() if down}
    assert len(heads) == 1, f"migrations/versions has heads {sorted(heads)}"
    return heads.pop()


def _current(conn: Connection) -> str | None:
    """The revision in ``alembic_version`` (None when the table is absent or empty)."""
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    rows = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
    return rows[0] if len(rows) == 1 else None


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
            from alembic import command

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
