"""``main``: parse the command line, run the handler, and turn every outcome into the exit
code scripts rely on (see ``runtime.cli``). No handler writes to stderr on failure itself;
this is the one place that decides what an error means."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import structlog

from domain.errors import (
    AssetcastError,
    AssetcastInputError,
    LeaseHeld,
    SessionLost,
    recorded_in_run,
)
from runtime.cli.exit_codes import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    PROG,
    UsageError,
)
from runtime.cli.output import one_line
from runtime.cli.parser import build_parser
from runtime.cli.plugins import load_plugins, plugin_names
from runtime.cli.run_commands import RUN_HANDLERS
from runtime.logging import configure_logging

log = structlog.get_logger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        sys.stderr.write(f"{PROG}: error: {one_line(error)}\n")
        return EXIT_BAD_INPUT
    except SystemExit as exit_:  # --help / --version
        return int(exit_.code or 0)
    configure_logging(level=args.log_level, json_lines=args.log_json)
    try:
        load_plugins(plugin_names(args.plugin))
        return int(args.handler(args))
    except BrokenPipeError:  # `assetcast events RUN | head`: the reader had enough
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        run_id = getattr(args, "run_id", None)
        hint = f"; `{PROG} resume {run_id}` continues" if run_id else ""
        sys.stderr.write(f"{PROG}: interrupted{hint}\n")
        return EXIT_INTERRUPTED
    except (AssetcastInputError, LeaseHeld) as error:
        if recorded_in_run(error) is not None:  # exit 2 means nothing was recorded
            return _run_failed(args, error)
        sys.stderr.write(f"{PROG}: error: {one_line(error)}\n")
        return EXIT_BAD_INPUT
    except SessionLost as error:  # another session drives the run now; it recorded nothing
        sys.stderr.write(f"{PROG}: stopped, this session lost the run: {one_line(error)}\n")
        return EXIT_RUN_FAILED
    except AssetcastError as error:
        return _run_failed(args, error)
    except Exception as error:
        if getattr(args, "run_id", None) is None or args.handler not in RUN_HANDLERS:
            raise
        return _run_failed(args, error)


def _run_failed(args: argparse.Namespace, error: BaseException) -> int:
    """The run recorded its failure; say so on one line and point at forensics."""
    run_id = getattr(args, "run_id", None)
    log.debug("run_failed_traceback", exc_info=error)
    where = f"run {run_id} failed" if run_id else "failed"
    sys.stderr.write(f"{PROG}: {where}: {type(error).__name__}: {one_line(error)}\n")
    if run_id:
        sys.stderr.write(f"{PROG}: see `{PROG} forensics {run_id}`; `{PROG} resume {run_id}`\n")
    return EXIT_RUN_FAILED
