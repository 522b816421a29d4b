"""``main``: parse the command line, run the handler, and turn every outcome into the exit
code scripts rely on (see ``runtime.cli``). No handler writes to stderr on failure itself;
this is the one place that decides what an error means.

"Run X failed ... see forensics / resume" is said only when the log shows a ``RunFailed``
this command recorded; when the command recorded nothing at all, its error is reported as
what it is (exit 2: nothing recorded), and when it recorded events but not its failure
(the store itself failed: disk full, lock timeout), the message says so.
"""

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
from runtime.cli.dataset_commands import cmd_export
from runtime.cli.exit_codes import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    PROG,
    UnreadableRuns,
    UsageError,
)
from runtime.cli.output import one_line
from runtime.cli.parser import build_parser
from runtime.cli.plugins import load_plugins, plugin_names
from runtime.cli.run_commands import RUN_HANDLERS
from runtime.cli.store_access import close_stores, resolve_run_argument
from runtime.logging import configure_logging

log = structlog.get_logger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        _error(error)
        return EXIT_BAD_INPUT
    except SystemExit as exit_:  # --help / --version
        return int(exit_.code or 0)
    configure_logging(level=args.log_level, json_lines=args.log_json)
    try:
        return _run(args)
    finally:
        close_stores(args)


def _run(args: argparse.Namespace) -> int:
    try:
        load_plugins(plugin_names(args.plugin))
        records = args.handler in RUN_HANDLERS or args.handler is cmd_export
        resolve_run_argument(args, records=records)
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
    except UnreadableRuns as error:
        for line in error.lines:
            sys.stderr.write(f"{PROG}: error: {' '.join(line.split())}\n")
        return EXIT_RUN_FAILED
    except (AssetcastInputError, LeaseHeld) as error:
        if recorded_in_run(error) is not None and _drives_a_run(args):
            return _run_failed(args, error)  # exit 2 means nothing was recorded
        _error(error)
        return EXIT_BAD_INPUT
    except SessionLost as error:  # another session drives the run now; it recorded nothing
        sys.stderr.write(f"{PROG}: stopped, this session lost the run: {one_line(error)}\n")
        return EXIT_RUN_FAILED
    except Exception as error:
        if _drives_a_run(args):
            return _run_failed(args, error)
        if isinstance(error, AssetcastError):
            return _store_failed(error)
        raise


def _error(error: BaseException) -> None:
    sys.stderr.write(f"{PROG}: error: {one_line(error)}\n")


def _store_failed(error: AssetcastError) -> int:
    """A command that records nothing could not do its work: exit 2 when the store could not
    be used at all (its URL, file, server or schema), exit 1 when its content is wrong."""
    from store.errors import StoreAccessError

    _error(error)
    return EXIT_BAD_INPUT if isinstance(error, StoreAccessError) else EXIT_RUN_FAILED


def _drives_a_run(args: argparse.Namespace) -> bool:
    return getattr(args, "run_id", None) is not None and args.handler in RUN_HANDLERS


def _recorded_by_this_command(args: argparse.Namespace) -> list[str] | None:
    """The event types this command appended to its run, read back from the log (the
    only witness that counts); None if the log cannot be read now."""
    start = getattr(args, "run_start_version", None)
    if start is None:  # failed before the run was even looked at
        return []
    from runtime.cli.store_access import db_url, open_store

    url = getattr(args, "run_db_url", None) or db_url(args)
    try:
        store = open_store(url, read_only=True)
    except Exception as error:  # noqa: BLE001 - the original failure is what we report
        log.debug("run_failure_check_failed", error=str(error))
        return None
    try:
        return [e.type for e in store.read(args.run_id, after_seq=int(start))]
    except AssetcastInputError:  # unknown run: it was never created
        return []
    except Exception as error:  # noqa: BLE001
        log.debug("run_failure_check_failed", error=str(error))
        return None
    finally:
        store.close()


def _run_failed(args: argparse.Namespace, error: BaseException) -> int:
    """Say on one line what happened to the run, pointing at forensics only when the
    failure is in the log."""
    run_id = args.run_id
    log.debug("run_failed_traceback", exc_info=error)
    what = f"{type(error).__name__}: {one_line(error)}"
    recorded = _recorded_by_this_command(args)
    if recorded == []:
        if not isinstance(error, AssetcastError):
            raise error
        _error(error)  # nothing was recorded: the run was not even started or continued
        return EXIT_BAD_INPUT
    if recorded is not None and "RunFailed" in recorded:
        sys.stderr.write(f"{PROG}: run {run_id} failed: {what}\n")
        sys.stderr.write(f"{PROG}: see `{PROG} forensics {run_id}`; `{PROG} resume {run_id}`\n")
        return EXIT_RUN_FAILED
    why = (
        "its failure could not be recorded" if recorded is not None
        else "the log could not be read to check whether its failure was recorded"
    )
    sys.stderr.write(
        f"{PROG}: run {run_id} stopped: {what} ({why}; `{PROG} forensics {run_id}` shows "
        "what the log holds)\n"
    )
    return EXIT_RUN_FAILED
