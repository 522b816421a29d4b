"""``assetcast catalog demo|check``: write the procedural demo catalog, or validate every
asset package in a folder before a run relies on it (a failing package is bad input)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runtime.cli.exit_codes import EXIT_BAD_INPUT, EXIT_OK, PROG, UsageError
from runtime.cli.output import one_line, out


def cmd_catalog_missing(args: argparse.Namespace) -> int:  # pragma: no cover - argparse guards
    raise UsageError("catalog: choose demo or check")


def cmd_catalog_demo(args: argparse.Namespace) -> int:
    from runtime.assets.demo_catalog import write_demo_catalog

    written = write_demo_catalog(Path(args.dir))
    out(f"demo catalog: {len(written)} packages in {Path(args.dir).absolute()}")
    return EXIT_OK


def cmd_catalog_check(args: argparse.Namespace) -> int:
    from runtime.assets.demo_catalog import check_catalog
    from runtime.cli.run_commands import collection_config

    results = check_catalog(Path(args.dir), limits=collection_config(args).mesh_limits)
    failed = 0
    for check in results:
        if check.ok:
            out(f"ok    {check.path}: {check.reason}")
        else:
            failed += 1
            out(f"FAIL  {check.path}: {one_line(check.reason)}")
    if failed:
        sys.stderr.write(f"{PROG}: error: {failed} of {len(results)} package(s) failed\n")
        return EXIT_BAD_INPUT
    return EXIT_OK
