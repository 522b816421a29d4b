"""Engine construction: URL resolution, refusing what is not a database, the SQLite
durability settings, read-only opening, and driver errors mapped to precise ones.

Every SQLite connection gets WAL, ``synchronous=FULL`` and a busy timeout via a
connect listener, so an acknowledged append survives a killed writer no matter
which code path opened the connection. Python's sqlite3 module is switched to
autocommit so SQLAlchemy's ``begin`` emits the BEGIN itself; that lets writers ask
for ``BEGIN IMMEDIATE`` (``execution_options(sqlite_begin="IMMEDIATE")``) and take
the write lock before reading what they are about to change. Other dialects ignore
that option and keep their defaults (PostgreSQL: READ COMMITTED, where the store's
compare-and-swap UPDATE waits on a concurrent writer's row lock and then re-checks).

Before SQLite sees a path, :func:`sqlite_target` checks what is there: SQLite would
happily block forever on a FIFO, journal into ``/dev``, or create a database in a
typo'd directory. A read-only engine never switches the journal mode and refuses
every write (``query_only``; ``mode=ro`` or ``immutable=1`` where the file cannot be
written at all, e.g. a read-only mount), so an archived store can be inspected and
nothing is left behind next to it. Driver errors reach callers only as the classes of
:mod:`store.errors`.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

from store.errors import (
    DatabaseNotFound,
    DatabaseReadOnly,
    DriverMissing,
    InvalidStoreURL,
    NotADatabase,
    redact,
    translate,
)

DEFAULT_URL = "sqlite:///assetcast.db"
DB_ENV = "ASSETCAST_DB"
BUSY_TIMEOUT_MS = 30_000
# SQLSTATEs meaning "a concurrent transaction won": serialization failure, deadlock.
_CONFLICT_SQLSTATES = frozenset({"40001", "40P01"})
_SQLITE_HEADER = b"SQLite format 3\x00"
# Database files this process has opened a descriptor of, by (device, inode). POSIX drops
# every fcntl lock a process holds on a file when it closes *any* descriptor of that file, so
# closing one while SQLite has the file open here would silently cancel SQLite's locks: another
# process could then check the WAL back into the file and delete it under this one's
# connections (SQLITE_IOERR_SHORT_READ, lost commits; sqlite.org "How To Corrupt An SQLite
# Database File", 2.2). The header and attribute checks therefore open a file only the first
# time this process meets it, before any connection to it exists, under this lock.
_LOOKED_AT: dict[tuple[int, int], bool] = {}  # -> the file carried the immutable attribute
_LOOK_LOCK = threading.Lock()
_SIDE_FILES = ("-wal", "-shm", "-journal")
_URL_EXAMPLE = "e.g. sqlite:///assetcast.db or postgresql+psycopg://user@host/dbname"

_DISPLAY: weakref.WeakKeyDictionary[Engine, EngineFacts] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class EngineFacts:
    """What messages need to know about an engine: its URL as the user gave it
    (password hidden) and how long SQLite waits for a lock."""

    url: str
    busy_ms: int
    read_only: bool


def resolve_url(url: str | None = None) -> str:
    """Explicit URL, else ``ASSETCAST_DB``, else ``assetcast.db`` in the working directory.

    Only ``None`` means "not given": an explicit empty URL is refused by
    :func:`make_engine`, never silently replaced by the default database.
    """
    if url is not None:
        return url
    return os.environ.get(DB_ENV) or DEFAULT_URL


def safe_url(engine: Engine) -> str:
    """The engine URL without its password, for messages."""
    facts = _DISPLAY.get(engine)
    return facts.url if facts else engine.url.render_as_string(hide_password=True)


def engine_facts(engine: Engine) -> EngineFacts:
    return _DISPLAY.get(engine) or EngineFacts(safe_url(engine), BUSY_TIMEOUT_MS, False)


def is_write_conflict(exc: DBAPIError) -> bool:
    """True if the driver error says a concurrent transaction got there first.

    Under REPEATABLE READ or SERIALIZABLE, PostgreSQL reports a lost race on the runs
    row as a serialization failure instead of letting the conditional UPDATE match no
    row; either way the caller lost the optimistic-concurrency race.
    """
    orig = exc.orig
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return code in _CONFLICT_SQLSTATES


def parse_url(url: str | None) -> URL:
    """The URL, or InvalidStoreURL saying why it is not one (password hidden)."""
    text = resolve_url(url)
    if not text.strip():
        raise InvalidStoreURL(repr(text), f"empty database URL ({_URL_EXAMPLE})")
    try:
        return make_url(text)
    except (ArgumentError, ValueError):
        raise InvalidStoreURL(
            repr(redact(text)), f"not a database URL ({_URL_EXAMPLE})"
        ) from None


def sqlite_path(parsed: URL) -> Path | None:
    """The file a SQLite URL names (None: in memory, a ``file:`` URI, or not SQLite)."""
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or database in (None, "", ":memory:"):
        return None
    if database.startswith("file:"):
        return None
    return Path(os.path.abspath(database))


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    for test, words in (
        (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return words
    return None if stat.S_ISREG(mode) else "not a regular file"


def sqlite_target(url: str, path: Path, *, must_exist: bool) -> bool:
    """Check what is at ``path`` before SQLite opens it; True if a database file exists.

    Only a regular file (or a new file in an existing directory) is acceptable, and so
    are only regular files beside it where SQLite keeps its journal.
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise NotADatabase(url, f"cannot inspect {path}: {error.strerror}") from None
    if info is None:
        if must_exist:
            raise DatabaseNotFound(url, f"no database file at {path} (nothing recorded there yet)")
        parent = path.parent
        if not parent.exists():
            raise DatabaseNotFound(
                url, f"directory {parent} does not exist (it is not created for a database)"
            )
        if not parent.is_dir():
            raise NotADatabase(url, f"{parent} is not a directory")
        return False
    kind = _kind(info.st_mode)
    if kind is not None:
        raise NotADatabase(url, f"{path} is {kind}, not a database file")
    for suffix in _SIDE_FILES:
        side = path.with_name(path.name + suffix)
        try:
            side_kind = _kind(side.stat().st_mode)
        except OSError:
            continue
        if side_kind is not None:
            raise NotADatabase(url, f"{side} is {side_kind}, not SQLite's {suffix[1:]} file")
    if info.st_size:
        _first_look(path, info, check=lambda: _check_header(url, path))
    return True


def _note_connected(path: Path) -> None:
    """SQLite has ``path`` open in this process now (a file it may just have created): from
    here on nothing here opens, and so closes, a descriptor of it."""
    try:
        info = path.stat()
    except OSError:
        return
    with _LOOK_LOCK:
        _LOOKED_AT.setdefault((info.st_dev, info.st_ino), False)


def _check_header(url: str, path: Path) -> None:
    """Refuse a file that is not SQLite before the driver says "file is not a database"
    deep inside a query; opened non-blocking and re-checked, so a swap to a FIFO between
    the check and the read cannot hang."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        if error.errno in (13, 1):  # EACCES, EPERM: let SQLite report what it can do
            return
        raise NotADatabase(url, f"cannot open {path}: {error.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotADatabase(url, f"{path} is not a regular file")
        head = os.read(fd, len(_SQLITE_HEADER))
    finally:
        os.close(fd)
    if head != _SQLITE_HEADER:
        raise NotADatabase(url, f"{path} is not a SQLite database file (no SQLite header)")


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


_FS_IOC_GETFLAGS = 0x80086601
_FS_IMMUTABLE_FL = 0x10


def _immutable_file(path: Path) -> bool:
    """True if the file carries the immutable attribute (``chattr +i``): nobody, root
    included, can write it, so SQLite may read it without locks or a ``-shm`` file."""
    try:
        import array
        import fcntl

        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (ImportError, OSError):
        return False
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags)
    except OSError:
        return False
    finally:
        os.close(fd)
    return bool(flags[0] & _FS_IMMUTABLE_FL)


def _first_look(
    path: Path, info: os.stat_result, *, check: Callable[[], None] | None = None
) -> bool:
    """Whether ``path`` carries the immutable attribute; the file is opened (``check``, then
    the attribute read) only the first time this process meets it (see ``_LOOKED_AT``)."""
    key = (info.st_dev, info.st_ino)
    with _LOOK_LOCK:
        if key not in _LOOKED_AT:
            if check is not None:
                check()
            _LOOKED_AT[key] = _immutable_file(path)
        return _LOOKED_AT[key]


def _immutable(path: Path) -> bool:
    """:func:`_immutable_file`, opening ``path`` only if this process never looked at it."""
    try:
        info = path.stat()
    except OSError:
        return False
    return _first_look(path, info)


def _require_writable(url: str, path: Path, exists: bool) -> None:
    """A writer needs the file and its directory (SQLite's journal lives beside it)."""
    directory = path.parent
    if _read_only_fs(directory):
        raise DatabaseReadOnly(
            url, f"{directory} is on a read-only filesystem; only read-only commands "
            "(runs, show, events, audit, forensics, verify, episode) work there",
        )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise DatabaseReadOnly(url, f"directory {directory} is not writable")
    if exists and not os.access(path, os.W_OK):
        raise DatabaseReadOnly(
            url, f"{path} is not writable; only read-only commands work on it"
        )


def _read_only_sqlite_url(parsed: URL, path: Path) -> tuple[URL, bool]:
    """How to open ``path`` without writing anything: (URL, whether it is a URI).

    Where we may write, an ordinary connection with ``query_only`` is used: SQLite then
    removes the ``-wal``/``-shm`` files it needs when the last connection closes, while
    a ``mode=ro`` connection would leave them behind. Where the file cannot be written
    (read-only mount, foreign directory), ``mode=ro``; if no writer can be active there
    (a read-only filesystem, an immutable file, or no ``-wal`` and no way to create one),
    ``immutable=1``, because ``mode=ro`` on a WAL database cannot create its ``-shm`` file
    there (and would leave one behind where it can).
    """
    directory = path.parent
    read_only_fs = _read_only_fs(path)
    writable = (
        not read_only_fs and os.access(path, os.W_OK) and os.access(directory, os.W_OK)
    )
    if writable:
        return parsed, False
    has_wal = path.with_name(path.name + "-wal").exists()
    query = {**parsed.query, "mode": "ro", "uri": "true"}
    if (
        read_only_fs or _immutable(path)
        or (not has_wal and not os.access(directory, os.W_OK))
    ):
        query["immutable"] = "1"
    uri = "file:" + quote(str(path), safe="/")
    return parsed.set(database=uri, query=query), True


def _busy_ms(parsed: URL, url: str) -> int:
    """``?timeout=SECONDS`` in a SQLite URL (the pysqlite option) sets the busy timeout."""
    raw = parsed.query.get("timeout")
    if raw is None:
        return BUSY_TIMEOUT_MS
    try:
        seconds = float(raw if isinstance(raw, str) else raw[-1])
    except ValueError:
        raise InvalidStoreURL(url, f"timeout={raw!r} is not a number of seconds") from None
    if not seconds >= 0:
        raise InvalidStoreURL(url, f"timeout={raw!r} must be >= 0 seconds")
    return int(seconds * 1000)


def make_engine(
    url: str | None = None, *, read_only: bool = False, must_exist: bool = False,
    shown_as: str | None = None,
) -> Engine:
    """An engine for ``url``, or a StoreAccessError naming the URL and what is wrong.

    ``must_exist`` (implied by ``read_only``): a missing SQLite file is DatabaseNotFound
    instead of a new empty database. ``shown_as``: the URL messages name instead (a
    database being built under a temporary name is reported under its real one).
    """
    parsed = parse_url(url)
    shown = shown_as or parsed.render_as_string(hide_password=True)
    busy_ms = BUSY_TIMEOUT_MS
    target = parsed
    path: Path | None = None
    is_sqlite = parsed.get_backend_name() == "sqlite"
    if is_sqlite:
        busy_ms = _busy_ms(parsed, shown)
        path = sqlite_path(parsed)
        if path is not None:
            exists = sqlite_target(shown, path, must_exist=must_exist or read_only)
            if read_only:
                target, _uri = _read_only_sqlite_url(parsed, path)
            else:
                _require_writable(shown, path, exists)
        elif read_only and (parsed.database or "").startswith("file:"):
            target = parsed.update_query_dict({"mode": "ro"})
    engine = _create(target, shown)
    _DISPLAY[engine] = EngineFacts(shown, busy_ms, read_only)
    _translate_errors(engine, shown, busy_ms, parsed.password, path)
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine, busy_ms, read_only)
        if path is not None:
            event.listen(engine, "connect", lambda _conn, _record: _note_connected(path))
    elif engine.dialect.name == "postgresql":
        _configure_postgresql(engine, read_only, _sets_lock_timeout(parsed))
    return engine


def _sets_lock_timeout(parsed: URL) -> bool:
    options = parsed.query.get("options") or ""
    text = options if isinstance(options, str) else " ".join(options)
    return "lock_timeout" in text


def _create(target: URL, shown: str) -> Engine:
    try:
        return sa.create_engine(target)
    except NoSuchModuleError:
        raise DriverMissing(
            shown, f"no SQLAlchemy dialect {target.drivername!r} is installed ({_URL_EXAMPLE})"
        ) from None
    except ImportError as error:
        module = getattr(error, "name", None) or str(error)
        raise DriverMissing(
            shown, f"the {target.drivername} driver is not installed (no module {module!r})"
        ) from None
    except (ArgumentError, ValueError, TypeError) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise InvalidStoreURL(shown, first) from None


def _translate_errors(
    engine: Engine, shown: str, busy_ms: int, password: str | None, path: Path | None
) -> None:
    @event.listens_for(engine, "handle_error")
    def _on_error(context) -> None:  # type: ignore[no-untyped-def]
        precise = translate(
            context.original_exception, shown, connecting=context.connection is None,
            busy_ms=busy_ms, password=password, path=path,
        )
        if precise is not None:
            raise precise from context.original_exception


def _configure_postgresql(engine: Engine, read_only: bool, own_lock_timeout: bool) -> None:
    """Read-only sessions for read-only engines; and the same patience as SQLite's busy
    timeout for locks (``lock_timeout``, unless the URL's ``options`` set one), so a
    session that holds a run's row forever is reported as DatabaseLocked instead of
    hanging every other writer."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        autocommit = getattr(dbapi_connection, "autocommit", None)
        if autocommit is False:
            dbapi_connection.autocommit = True
        cursor = dbapi_connection.cursor()
        try:
            if not own_lock_timeout:
                cursor.execute(f"SET lock_timeout = {BUSY_TIMEOUT_MS}")
            if read_only:
                cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        finally:
            cursor.close()
        if autocommit is False:
            dbapi_connection.autocommit = False


def _configure_sqlite(engine: Engine, busy_ms: int, read_only: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
            if read_only:
                cursor.execute("PRAGMA query_only = ON")
            elif engine.url.database not in (None, "", ":memory:"):
                _enable_wal(cursor, busy_ms)
            cursor.execute("PRAGMA synchronous = FULL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # type: ignore[no-untyped-def]
        mode = conn.get_execution_options().get("sqlite_begin", "")
        conn.exec_driver_sql(f"BEGIN {mode}".strip())


def _enable_wal(cursor: Any, busy_ms: int) -> None:
    """Switch the file to WAL, waiting out other processes doing the same.

    Changing the journal mode needs an exclusive lock, and SQLite reports "database is
    locked" at once instead of calling the busy handler; several processes opening a new
    database together (a collector and a resume racing) would fail without this loop.
    """
    deadline = time.monotonic() + busy_ms / 1000
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
