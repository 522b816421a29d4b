"""``assetcast db upgrade|current``: the event store's schema version. The only command that
changes a database without recording a run, so it gets its own small module."""

from __future__ import annotations

import argparse

from runtime.cli.exit_codes import EXIT_OK, UsageError
from runtime.cli.output import out
from runtime.cli.store_access import db_url, missing_sqlite_file


def cmd_db(args: argparse.Namespace) -> int:
    from store import admin

    url = db_url(args)
    if args.action == "current" and (missing := missing_sqlite_file(url)) is not None:
        raise UsageError(f"--db {url}: no database at {missing}")
    if args.action == "upgrade":
        admin.upgrade(url)
        out(f"{url}: upgraded to {admin.current(url)}")
    else:
        out(str(admin.current(url)))
    return EXIT_OK
