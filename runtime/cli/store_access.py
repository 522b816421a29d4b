"""Which event store a command uses, and opening it so that a typo is bad input (exit 2)
rather than a fresh empty database or an empty report.

Read-only commands open the store read-only: they work on an archived store (read-only
filesystem or file) and never create, migrate or otherwise touch a database; why a
database cannot be used is a :mod:`store.errors` class naming the URL.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from domain.errors import UnknownRun

DB_ENV = "ASSETCAST_DB"  # as store.engine reads it; not imported, to keep startup light


def default_db_url() -> str:
    """``ASSETCAST_DB`` or ``assetcast.db`` in the working directory."""
    return os.environ.get(DB_ENV) or f"sqlite:///{Path.cwd() / 'assetcast.db'}"


def db_url(args: argparse.Namespace) -> str:
    """``--db`` as given (an explicit empty URL is refused later, not replaced), else the
    default."""
    given = getattr(args, "db", None)
    return default_db_url() if given is None else given


def open_store(url: str, *, create: bool = False, read_only: bool = False) -> Any:
    """Open the event store. Only commands that record runs may create a new database (so
    a mistyped ``--db`` leaves no empty file behind); query commands open it read-only."""
    from store.event_store import EventStore

    return EventStore(url, read_only=read_only, must_exist=not create)


def open_for_reading(args: argparse.Namespace) -> Any:
    """The store of a read-only command (``runs``, ``show``, ``events``, ...)."""
    return _remember(args, open_store(db_url(args), read_only=True))


def open_for_writing(args: argparse.Namespace, *, create: bool = False) -> Any:
    """The store of a command that records events (``create``: may make a new database)."""
    return _remember(args, open_store(db_url(args), create=create))


def _remember(args: argparse.Namespace, store: Any) -> Any:
    """Closed by ``main`` when the command ends: SQLite removes its ``-wal``/``-shm`` files
    only when the last connection closes, so a store left to the garbage collector could
    leave them behind next to a database that was only read."""
    vars(args).setdefault("opened_stores", []).append(store)
    return store


def close_stores(args: argparse.Namespace) -> None:
    for store in vars(args).pop("opened_stores", []):
        try:
            store.close()
        except Exception:  # noqa: BLE001, S110 - the command's outcome is already decided
            pass


def unknown_run(run_id: str) -> UnknownRun:
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
        raise unknown_run(run_id)
    return events


def require_run(store: Any, run_id: str) -> int:
    """Refuse an unknown run as :func:`read_run` does, for commands that do not need its
    events here: the store's cached fold answers without reading the whole log, which the
    command would otherwise read twice. Returns the run's version (where this command's
    own events, if any, will start)."""
    try:
        return int(store.state(run_id).version)
    except UnknownRun:
        raise unknown_run(run_id) from None


LATEST_RUN = "latest"
#: How many matching ids an ambiguous-prefix error lists before "...".
MAX_LISTED_MATCHES = 5


def resolve_run_id(store: Any, given: str) -> str:
    """The run a command's RUN argument names: an exact id, ``latest`` (the most recently
    created run), or a prefix that matches exactly one id. An ambiguous prefix is bad input
    listing the matches; an exact id always wins, even if it prefixes others."""
    runs = store.list_runs()  # ordered by creation time, then id
    ids = [summary.run_id for summary in runs]
    if given in ids:
        return given
    if given == LATEST_RUN:
        if not ids:
            raise UnknownRun("no runs in the store, so no latest run")
        return ids[-1]
    matches = [run_id for run_id in ids if given and run_id.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise unknown_run(given)
    listed = ", ".join(matches[:MAX_LISTED_MATCHES])
    more = ", ..." if len(matches) > MAX_LISTED_MATCHES else ""
    raise UnknownRun(
        f"run prefix {given!r} is ambiguous: {len(matches)} runs match ({listed}{more})"
    )


def resolve_run_argument(args: argparse.Namespace, *, records: bool) -> None:
    """Replace ``args.run_id`` (a command's RUN) by the full id it names, opening the store
    as the command will (``records``: read-write, else read-only), so every command that
    takes RUN accepts ``latest`` and unique prefixes the same way."""
    given = getattr(args, "run_id", None)
    many = getattr(args, "run_ids", None)
    if not isinstance(given, str) and not (isinstance(many, list) and many):
        return  # no RUN given (e.g. `db upgrade`, whose RUN list is optional): open nothing
    store = open_for_writing(args) if records else open_for_reading(args)
    if isinstance(given, str):
        args.run_id = resolve_run_id(store, given)
    if isinstance(many, list) and many:
        args.run_ids = [resolve_run_id(store, each) for each in many]
