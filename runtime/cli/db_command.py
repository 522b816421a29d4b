"""``assetcast db upgrade|current``: the event store's schema version. The only command that
changes a database without recording a run, so it gets its own small module."""

from __future__ import annotations

import argparse

from runtime.cli.exit_codes import EXIT_OK
from runtime.cli.output import out
from runtime.cli.store_access import db_url


def cmd_db(args: argparse.Namespace) -> int:
    from store import admin
    from store.errors import redact

    url = db_url(args)
    if args.action == "upgrade":
        revision = admin.upgrade(url)
        out(f"{redact(url)}: upgraded to {revision}")
    else:
        out(str(admin.current(url, must_exist=True)))  # read-only; a typo'd file is an error
    return EXIT_OK
