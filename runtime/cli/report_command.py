"""``assetcast report RUN --out DIR``: the run's HTML/PNG report."""

from __future__ import annotations

import argparse
from pathlib import Path

from runtime.cli.exit_codes import EXIT_OK, UsageError
from runtime.cli.output import out
from runtime.cli.store_access import open_for_reading, require_run


def cmd_report(args: argparse.Namespace) -> int:
    from runtime.report import write_report

    target = Path(args.out)
    if target.exists() and not target.is_dir():
        raise UsageError(f"--out {args.out}: exists and is not a folder")
    store = open_for_reading(args)
    from runtime.cli.chain_notice import warn_if_chain_broken

    warn_if_chain_broken(store, args.run_id)  # a broken chain is warned about first
    require_run(store, args.run_id)  # unknown run: exit 2 (snapshot + tail, no log read)
    result = write_report(store, args.run_id, target, thumbnails=not args.no_thumbnails)
    out(f"report: {result.html_path}")
    return EXIT_OK
