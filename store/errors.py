"""Why a database could not be used, as precise error classes that carry the URL.

Every way of failing to reach, open, read or write the store ends here as one
:class:`StoreAccessError` subclass whose message is a single line naming the URL
(password redacted) and the cause, in the spirit of SQLAlchemy's own precise errors but
without their 100-line tracebacks. :func:`translate` is the one place that reads
driver exceptions (sqlite3 error names, PostgreSQL SQLSTATEs); the engine installs it
as a ``handle_error`` hook, so no caller interprets driver errors itself. Errors that
mean something to the store's logic (integrity violations, serialization failures)
are deliberately *not* translated: the append path maps those to ConcurrencyError.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from domain.errors import StoreError

# Below this much free space an I/O error while writing is the disk being full.
_LOW_SPACE_BYTES = 1 << 20

_PASSWORD_IN_URL = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


class StoreAccessError(StoreError):
    """The database at ``url`` cannot be used as an event store; ``cause`` says why."""

    def __init__(self, url: str, cause: str) -> None:
        self.url = url
        self.cause = " ".join(cause.split())
        super().__init__(f"database {url}: {self.cause}")


class InvalidStoreURL(StoreAccessError):
    """The text is not a database URL at all (empty, unparsable, unsupported options)."""


class DriverMissing(StoreAccessError):
    """No SQLAlchemy dialect or no DBAPI driver is installed for the URL's scheme."""


class DatabaseNotFound(StoreAccessError):
    """Nothing recorded there: no such file, no such directory, no such database."""


class NotADatabase(StoreAccessError):
    """The URL names something that is not a database (a directory, FIFO, device, text)."""


class DatabaseUnreachable(StoreAccessError):
    """The server refused or failed the connection, or the file cannot be opened."""


class DatabaseCorrupt(StoreAccessError):
    """The database file is damaged."""


class DatabaseReadOnly(StoreAccessError):
    """A write was needed but the database (or its filesystem) is read-only."""


class DatabaseFull(StoreAccessError):
    """The disk, quota or database size limit is exhausted."""


class DatabaseIOError(StoreAccessError):
    """The operating system reported an I/O error under the database."""


class DatabaseLocked(StoreAccessError):
    """Another process held the write lock past the busy timeout."""

    def held_by(self, holder: str) -> DatabaseLocked:
        """The same error, naming who holds the run (from its lease)."""
        named = DatabaseLocked(self.url, f"{self.cause}; {holder}")
        named.__notes__ = list(getattr(self, "__notes__", []))
        return named


class SchemaError(StoreAccessError):
    """The schema is not one this assetcast can use as it is."""


class SchemaTooNew(SchemaError):
    """``alembic_version`` names a revision this assetcast does not know."""


class SchemaOutdated(SchemaError):
    """An older revision, on a command that must not migrate (read-only commands)."""


class SchemaMissing(SchemaError):
    """No assetcast schema, or assetcast tables without ``alembic_version``."""


class SchemaMismatch(SchemaError):
    """A table or column the recorded revision promises is not there (altered by hand)."""


_MISMATCH_TEXT = "the schema does not match its recorded revision (altered outside assetcast?)"


def redact(url: str) -> str:
    """``url`` without its password, even when SQLAlchemy cannot parse it."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return _PASSWORD_IN_URL.sub(r"\1***@", url)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _scrub(text: str, password: str | None) -> str:
    return text.replace(password, "***") if password else text


def busy_text(busy_ms: int) -> str:
    seconds = busy_ms / 1000
    return f"{seconds:g} s"


def translate(
    error: BaseException, url: str, *, connecting: bool = False, busy_ms: int = 0,
    password: str | None = None, path: Path | None = None,
) -> StoreAccessError | None:
    """The precise error for a driver exception, or None to keep the original.

    ``connecting``: the error happened while opening a connection, so any operational
    failure means the database could not be reached at all. ``path``: the SQLite file,
    whose filesystem is asked for free space when SQLite reports only an I/O error (a
    full tmpfs fails WAL writes as ``SQLITE_IOERR_*``, not ``SQLITE_FULL``).
    """
    name = getattr(error, "sqlite_errorname", None)
    if name is not None:
        if str(name).startswith("SQLITE_IOERR") and path is not None:
            free = _free_bytes(path.parent)
            if free is not None and free < _LOW_SPACE_BYTES:
                return DatabaseFull(
                    url, f"no space left for the database: {free} bytes free on the "
                    f"filesystem of {path.parent} ({name}: {_first_line(error)})",
                )
        return _translate_sqlite(error, str(name), url, busy_ms)
    sqlstate = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
    message = _scrub(_first_line(error), password)
    if sqlstate is not None:
        found = _translate_sqlstate(str(sqlstate), url, message)
        if found is not None:
            return found
    if connecting and type(error).__name__ in ("OperationalError", "InterfaceError"):
        return DatabaseUnreachable(url, f"cannot connect: {message}")
    return None


def _free_bytes(directory: Path) -> int | None:
    try:
        info = os.statvfs(directory)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


def _translate_sqlite(
    error: BaseException, name: str, url: str, busy_ms: int
) -> StoreAccessError | None:
    message = f"{name}: {_first_line(error)}"
    if name.startswith("SQLITE_BUSY") or name.startswith("SQLITE_LOCKED"):
        return DatabaseLocked(
            url, f"another process held the write lock for longer than the "
            f"{busy_text(busy_ms)} busy timeout ({message})",
        )
    if name == "SQLITE_FULL":
        return DatabaseFull(url, f"no space left for the database ({message})")
    if name.startswith("SQLITE_READONLY"):
        return DatabaseReadOnly(url, f"the database is read-only here ({message})")
    if name.startswith("SQLITE_CANTOPEN"):
        return DatabaseUnreachable(url, f"cannot open the database file ({message})")
    if name == "SQLITE_NOTADB":
        return NotADatabase(url, "not a SQLite database file")
    if name.startswith("SQLITE_CORRUPT"):
        return DatabaseCorrupt(url, f"the database file is damaged ({message})")
    if name.startswith("SQLITE_IOERR"):
        return DatabaseIOError(url, f"I/O error ({message})")
    if name == "SQLITE_ERROR" and message.split(": ", 1)[-1].startswith(
        ("no such table", "no such column", "table ", "has no column")
    ):
        return SchemaMismatch(url, f"{_MISMATCH_TEXT}: {message}")
    if name in ("SQLITE_PERM", "SQLITE_AUTH"):
        return DatabaseReadOnly(url, f"permission denied ({message})")
    return None


def _translate_sqlstate(sqlstate: str, url: str, message: str) -> StoreAccessError | None:
    if sqlstate.startswith("08") or sqlstate.startswith("57P"):
        return DatabaseUnreachable(url, f"connection lost or refused: {message}")
    if sqlstate.startswith("28"):
        return DatabaseUnreachable(url, f"authentication failed: {message}")
    if sqlstate in ("42P01", "42703"):  # undefined table, undefined column
        return SchemaMismatch(url, f"{_MISMATCH_TEXT}: {message}")
    if sqlstate == "3D000":
        return DatabaseNotFound(url, message)
    if sqlstate == "25006":
        return DatabaseReadOnly(url, f"the database is read-only here ({message})")
    if sqlstate in ("53100", "53200", "54000"):
        return DatabaseFull(url, f"no space left for the database ({message})")
    if sqlstate == "55P03":
        return DatabaseLocked(
            url, f"another session held a lock for longer than the lock timeout ({message})"
        )
    if sqlstate.startswith("58"):
        return DatabaseIOError(url, f"I/O error ({message})")
    if sqlstate == "XX001" or sqlstate == "XX002":
        return DatabaseCorrupt(url, f"the database is damaged ({message})")
    return None
