"""``assetcast db upgrade|current|rebuild-snapshots``: the event store's schema version and
its caches. The only command that changes a database without recording a run, so it gets
its own small module."""

from __future__ import annotations

import argparse

from runtime.cli.exit_codes import EXIT_OK, UsageError
from runtime.cli.output import out
from runtime.cli.store_access import db_url, missing_sqlite_file, open_store, require_run


def cmd_db(args: argparse.Namespace) -> int:
    from store import admin

    url = db_url(args)
    run_ids = getattr(args, "run_ids", None) or []
    if run_ids and args.action != "rebuild-snapshots":
        raise UsageError(f"db {args.action} takes no RUN argument")
    if args.action == "rebuild-snapshots":
        return _rebuild_snapshots(url, run_ids)
    if args.action == "current" and (missing := missing_sqlite_file(url)) is not None:
        raise UsageError(f"--db {url}: no database at {missing}")
    if args.action == "upgrade":
        admin.upgrade(url)
        out(f"{url}: upgraded to {admin.current(url)}")
    else:
        out(str(admin.current(url)))
    return EXIT_OK


def _rebuild_snapshots(url: str, run_ids: list[str]) -> int:
    """Recompute every snapshot from the log alone (they are a cache: this never changes what
    a run is, only how fast it loads)."""
    store = open_store(url)
    try:
        for run_id in run_ids:
            require_run(store, run_id)
        records = store.rebuild_snapshots(run_ids or None)
    finally:
        store.close()
    runs = sorted({r.run_id for r in records})
    for run_id in runs:
        at = max(r.seq for r in records if r.run_id == run_id)
        kinds = sorted(r.kind for r in records if r.run_id == run_id)
        out(f"{run_id}: snapshots at seq {at} ({', '.join(kinds)})")
    out(f"{url}: rebuilt snapshots of {len(runs)} run(s)")
    return EXIT_OK
