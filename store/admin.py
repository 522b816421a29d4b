"""Schema administration: check a database's revision, upgrade it to the newest one.

The Alembic scripts are located relative to the installed ``migrations`` package, so
this works from any working directory and from an installed wheel.

Every opener classifies the database first (:func:`schema_status`): at head, behind
(a known older revision), newer than this assetcast (an unknown revision), empty, or
holding assetcast tables without ``alembic_version`` (a schema nobody can vouch for).
Writers upgrade an empty or older database; read-only openers never do, and say what
to run instead; nobody touches a newer or unversioned one.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import secrets
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine

import migrations
from store.engine import engine_facts, make_engine, parse_url, resolve_url, sqlite_path
from store.errors import DatabaseNotFound, SchemaMissing, SchemaOutdated, SchemaTooNew
from store.leases import pid_alive
from store.tables import STORE_METADATA

# PostgreSQL advisory lock key serializing schema upgrades (ASCII "astcast").
_UPGRADE_LOCK_KEY = 0x61737463617374
_STORE_TABLES = frozenset(STORE_METADATA.tables)


def alembic_config(url: str | None = None) -> Config:
    """An Alembic Config built in code (no alembic.ini or CWD needed)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).resolve().parent))
    cfg.set_main_option("sqlalchemy.url", resolve_url(url).replace("%", "%%"))
    return cfg


@lru_cache(maxsize=1)
def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    head = _script().get_current_head()
    assert head is not None, "migrations/versions holds no revision"
    return head


@lru_cache(maxsize=1)
def known_revisions() -> frozenset[str]:
    return frozenset(r.revision for r in _script().walk_revisions())


@dataclass(frozen=True)
class SchemaStatus:
    """Where a database's schema stands relative to this assetcast."""

    revisions: tuple[str, ...]  # what alembic_version holds (empty: no row or no table)
    versioned: bool             # alembic_version exists
    store_tables: tuple[str, ...]  # assetcast tables present

    @property
    def at_head(self) -> bool:
        return self.revisions == (head_revision(),)

    @property
    def unknown(self) -> tuple[str, ...]:
        return tuple(r for r in self.revisions if r not in known_revisions())

    @property
    def empty(self) -> bool:
        return not self.revisions and not self.store_tables


def schema_status(conn: Connection) -> SchemaStatus:
    inspector = sa.inspect(conn)
    tables = set(inspector.get_table_names())
    versioned = "alembic_version" in tables
    revisions: tuple[str, ...] = ()
    if versioned:
        revisions = tuple(sorted(MigrationContext.configure(conn).get_current_heads()))
    return SchemaStatus(revisions, versioned, tuple(sorted(tables & _STORE_TABLES)))


def _refuse_unusable(status: SchemaStatus, url: str) -> None:
    """The states nobody may use or migrate: a newer schema, an unversioned one."""
    if status.unknown:
        raise SchemaTooNew(
            url, f"written by a newer assetcast (schema revision {', '.join(status.unknown)}); "
            f"this assetcast knows revisions up to {head_revision()}: upgrade assetcast",
        )
    if not status.revisions and status.store_tables:
        missing = "is empty" if status.versioned else "is missing"
        raise SchemaMissing(
            url, f"has assetcast tables ({', '.join(status.store_tables)}) but its "
            f"alembic_version table {missing}, so its schema revision is unknown "
            "(not created by assetcast's migrations): refusing to use or migrate it",
        )


def check_readable(engine: Engine) -> None:
    """Refuse, without changing anything, a database a read-only command cannot read."""
    url = engine_facts(engine).url
    with engine.connect() as conn:
        status = schema_status(conn)
    _refuse_unusable(status, url)
    if status.empty:
        raise SchemaMissing(url, "holds no assetcast store (nothing recorded there yet)")
    if not status.at_head:
        raise SchemaOutdated(
            url, f"is at schema revision {', '.join(status.revisions)}, older than this "
            f"assetcast's {head_revision()}: run `assetcast db upgrade` first "
            "(read-only commands never migrate)",
        )


def check_writable_store(engine: Engine) -> None:
    """Refuse, without changing anything, what a command continuing a run cannot use: no
    store at all, a newer or unversioned schema (an older one is upgraded later)."""
    url = engine_facts(engine).url
    with engine.connect() as conn:
        status = schema_status(conn)
    _refuse_unusable(status, url)
    if status.empty:
        raise SchemaMissing(url, "holds no assetcast store (nothing recorded there yet)")


def _lock_schema(conn: Connection) -> None:
    """Serialize concurrent upgrades: SQLite already holds the write lock (BEGIN
    IMMEDIATE); PostgreSQL takes a transaction-scoped advisory lock, since two
    transactions creating the same tables would otherwise fail on catalog conflicts."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _UPGRADE_LOCK_KEY})


def upgrade_engine(engine: Engine) -> str:
    """Upgrade to head under the write lock, so concurrent openers do not race."""
    head = head_revision()
    url = engine_facts(engine).url
    with engine.connect() as conn:
        conn.execution_options(sqlite_begin="IMMEDIATE")
        with conn.begin():
            _lock_schema(conn)
            status = schema_status(conn)
            _refuse_unusable(status, url)
            if status.at_head:
                return head
            cfg = alembic_config(str(engine.url))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    return head


def ensure_schema(engine: Engine, *, create: bool = True) -> None:
    """Cheap check first (a read), upgrade only when the database is empty or behind.

    ``create=False``: an empty database is refused instead of given a schema (commands
    that continue an existing run have nothing to do in one)."""
    with engine.connect() as conn:
        status = schema_status(conn)
    url = engine_facts(engine).url
    _refuse_unusable(status, url)
    if status.empty and not create:
        raise SchemaMissing(url, "holds no assetcast store (nothing recorded there yet)")
    if not status.at_head:
        upgrade_engine(engine)


def create_sqlite_store(url: str | None) -> None:
    """A new SQLite database appears complete (schema at head) or not at all.

    The schema is built in a temporary file beside it and hard-linked into place, so a
    full disk or a crash while creating it leaves nothing behind, and a concurrent
    opener never sees a half-made schema. If another process created the database
    meanwhile, theirs is kept. Anything that is not a missing SQLite file is left to
    the ordinary opening path (which also reports why a path is unusable).
    """
    parsed = parse_url(url)
    path = sqlite_path(parsed)
    if path is None or path.exists() or not path.parent.is_dir():
        return
    shown = parsed.render_as_string(hide_password=True)
    _remove_abandoned_attempts(path)
    temporary = path.with_name(
        f".{path.name}.creating-{os.getpid()}-{secrets.token_hex(6)}"
    )
    engine = make_engine(
        parsed.set(database=str(temporary)).render_as_string(hide_password=False),
        shown_as=shown,
    )
    try:
        try:
            upgrade_engine(engine)
        finally:
            engine.dispose()  # the last connection checkpoints and removes -wal/-shm
        _fsync(temporary)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return  # another process created it first: use theirs
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                raise
            return  # no hard links here: the ordinary path creates it in place
        _fsync(path.parent)
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{temporary}{suffix}")


def _remove_abandoned_attempts(path: Path) -> None:
    """Temporary files of creators killed on this host (their pid is gone) are garbage:
    only the creator ever opens its own temporary database."""
    for leftover in path.parent.glob(f".{glob.escape(path.name)}.creating-*"):
        pid_text = leftover.name.rsplit(".creating-", 1)[1].split("-", 1)[0]
        if not pid_text.isdigit() or pid_alive(int(pid_text)):
            continue
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def upgrade(url: str | None = None) -> str:
    """Upgrade the database at ``url`` to head; return the revision it is now at."""
    create_sqlite_store(url)
    engine = make_engine(url)
    try:
        return upgrade_engine(engine)
    finally:
        engine.dispose()


def current(url: str | None = None, *, must_exist: bool = False) -> str | None:
    """The revision the database at ``url`` is at, or None if it was never upgraded (a
    missing SQLite file included, unless ``must_exist``). Read-only: nothing is created
    or migrated; a newer or unversioned schema is refused."""
    try:
        engine = make_engine(url, read_only=True)
    except DatabaseNotFound:
        path = sqlite_path(parse_url(url))
        if not must_exist and path is not None and not path.exists():
            return None
        raise
    try:
        with engine.connect() as conn:
            status = schema_status(conn)
        _refuse_unusable(status, engine_facts(engine).url)
        return ", ".join(status.revisions) or None
    finally:
        engine.dispose()
