"""The ``assetcast`` command line.

Exit codes are a contract for scripts: 0 success, 1 the run failed (its failure is in the
log, ``assetcast forensics RUN`` tells the story; or the store failed after the command had
recorded events, and the line says the failure could not be recorded; or a report had to
leave out a run whose log cannot be decoded, named on stderr), 2 bad input or an unusable
store (one line on stderr naming what to fix or the database URL and cause, no traceback,
nothing appended to the store), 130 interrupted.

Command output (tables, JSON) goes to stdout; logs go to stderr (see runtime/logging.py).
Heavy modules (the simulator, torch) are imported inside the commands that need them, so
read-only commands like ``runs`` stay quick.

Where things are:

* ``entry_point`` -- ``main``: parse, dispatch, map every outcome to its exit code.
* ``parser`` -- the argparse tree (flags, subcommands, which handler each one calls).
* ``exit_codes`` -- program name, exit codes and ``UsageError`` (exit 2).
* ``output`` -- the only writer to stdout, and the plain text table.
* ``store_access`` -- which database, opening it, reading one run.
* ``run_commands`` -- commands that create or continue a run (prepare/run/collect/resume/demo).
* ``catalog_commands`` -- write or check a catalog of asset packages.
* ``query_commands`` -- read-only reports on recorded runs (runs/show/events/audit/...).
* ``db_command`` -- the event store schema (upgrade/current).
* ``batch_table`` -- the per-batch table shown by ``demo`` and ``show``.
"""

from runtime.cli.entry_point import main

__all__ = ["main"]
