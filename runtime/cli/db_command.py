"""``assetcast db upgrade|current|rebuild-snapshots``: the store schema and its caches. The
only command that changes a database without recording a run, so it gets its own module."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterable

from runtime.cli.exit_codes import EXIT_OK, UsageError
from runtime.cli.output import out
from runtime.cli.store_access import db_url, open_for_writing, require_run


def cmd_db(args: argparse.Namespace) -> int:
    from store import admin
    from store.errors import redact

    url = db_url(args)
    run_ids = getattr(args, "run_ids", None) or []
    if run_ids and args.action != "rebuild-snapshots":
        raise UsageError(f"db {args.action} takes no RUN argument")
    if args.action == "rebuild-snapshots":
        return _rebuild_snapshots(args, redact(url), run_ids)
    if args.action == "upgrade":
        revision = admin.upgrade(url)
        out(f"{redact(url)}: upgraded to {revision}")
    else:
        out(str(admin.current(url, must_exist=True)))  # read-only; a typo'd file is an error
    return EXIT_OK


def _kinds(kinds: Iterable[str]) -> str:
    """The kinds written, a chunked projection's chunks (``kind/chunk``) counted, not listed."""
    chunks: Counter[str] = Counter()
    heads = set()
    for kind in kinds:
        head, _, chunk = kind.partition("/")
        heads.add(head)
        if chunk:
            chunks[head] += 1
    return ", ".join(
        f"{kind} ({chunks[kind]} chunks)" if chunks[kind] else kind for kind in sorted(heads)
    )


def _rebuild_snapshots(args: argparse.Namespace, shown_url: str, run_ids: list[str]) -> int:
    """Recompute every snapshot from the log alone (they are a cache: this never changes what
    a run is, only how fast it loads)."""
    store = open_for_writing(args)
    for run_id in run_ids:
        require_run(store, run_id)
    records = store.rebuild_snapshots(run_ids or None)
    runs = sorted({r.run_id for r in records})
    for run_id in runs:
        at = max(r.seq for r in records if r.run_id == run_id)
        kinds = _kinds(r.kind for r in records if r.run_id == run_id)
        out(f"{run_id}: snapshots at seq {at} ({kinds})")
    out(f"{shown_url}: rebuilt snapshots of {len(runs)} run(s)")
    return EXIT_OK
