"""The ``assetcast`` command line.

Exit codes are a contract for scripts: 0 success, 1 the run failed (its failure is in the
log, ``assetcast forensics RUN`` tells the story), 2 bad input (one line on stderr naming
what to fix, no traceback, nothing appended to the store), 130 interrupted.

Command output (tables, JSON) goes to stdout; logs go to stderr (see runtime/logging.py).
Heavy modules (the simulator, torch) are imported inside the commands that need them, so
read-only commands like ``runs`` stay quick.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import structlog

from domain.canonical import canonical_json
from domain.errors import AssetcastError, AssetcastInputError, ConfigError, LeaseHeld, UnknownRun
from runtime.demo import DEMO_CONFIG
from runtime.files import report_text
from runtime.logging import LEVELS, configure_logging
from store.projections.audit import episode_outcomes, event_time, run_summary

log = structlog.get_logger(__name__)

PROG = "assetcast"
DB_ENV = "ASSETCAST_DB"
EXIT_OK, EXIT_RUN_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130

# CollectionConfig field -> the flag that sets it (for error messages and parsing).
CONFIG_FLAGS: dict[str, str] = {
    "seed": "--seed",
    "max_batches": "--batches",
    "episodes_per_batch": "--episodes-per-batch",
    "candidates_per_role": "--candidates-per-role",
    "max_search_nodes": "--max-search-nodes",
    "settle_steps": "--settle-steps",
}


class UsageError(AssetcastInputError):
    """A command line that argparse (or a command's own checks) refused."""


# --------------------------------------------------------------------------- output helpers


def out(text: str = "") -> None:
    """Command output: stdout, newline-terminated (this module is the only writer)."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain left-aligned text table (empty string cells for None)."""
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], len(value))
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(widths[i]) for i, v in enumerate(row)).rstrip() for row in cells]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- store access


def default_db_url() -> str:
    """``ASSETCAST_DB`` or ``assetcast.db`` in the working directory."""
    return os.environ.get(DB_ENV) or f"sqlite:///{Path.cwd() / 'assetcast.db'}"


def db_url(args: argparse.Namespace) -> str:
    return getattr(args, "db", None) or default_db_url()


def missing_sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names, if it does not exist yet (other backends: None)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError(f"--db {url!r}: not a database URL") from None
    database = parsed.database
    if not parsed.drivername.startswith("sqlite") or database in (None, "", ":memory:"):
        return None
    if database.startswith("file:"):
        return None
    path = Path(database)
    return None if path.exists() else path


def open_store(url: str, *, create: bool = False) -> Any:
    """Open the event store; only commands that record runs may create a new database, so a
    mistyped ``--db`` on a query is reported instead of leaving an empty file behind."""
    from store.event_store import EventStore

    if not create and (missing := missing_sqlite_file(url)) is not None:
        raise UsageError(f"--db {url}: no database at {missing} (nothing recorded there yet)")
    return EventStore(url)


def read_run(store: Any, run_id: str) -> list[Any]:
    """The run's events; an unknown run is bad input (exit 2), never an empty report."""
    try:
        events = list(store.read(run_id))
    except UnknownRun:
        events = []
    if not events:
        raise UnknownRun(f"unknown run {run_id!r} (use `assetcast runs` to list runs)")
    return events


# --------------------------------------------------------------------------- argument parsing


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (``assetcast: error: ...``) and exit 2 via main."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _common(parser: argparse.ArgumentParser, *, db: bool, top: bool) -> None:
    """Flags accepted before or after the subcommand; subparsers must not reset them."""
    default = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--log-level",
        default="info" if top else argparse.SUPPRESS,
        choices=sorted(LEVELS, key=LEVELS.__getitem__),
        help="minimum level of log lines on stderr (default: info)",
    )
    parser.add_argument(
        "--log-json",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="log JSON lines instead of key=value text",
    )
    if db:
        parser.add_argument(
            "--db",
            metavar="URL",
            default=default,
            help=f"event store URL (default: ${DB_ENV} or sqlite:///assetcast.db in the cwd)",
        )


def _config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, help="base seed; batch i uses seed + i (default 0)")
    parser.add_argument("--batches", type=int, help="number of batches (asset sets), default 1")
    parser.add_argument("--candidates-per-role", type=int, help="candidates kept per role (32)")
    parser.add_argument("--max-search-nodes", type=int, help="matcher search budget (1000)")
    parser.add_argument("--settle-steps", type=int, help="physics steps after each reset (0)")
    parser.add_argument("--episodes-per-batch", type=int, help="episodes per batch (default 1)")
    parser.add_argument(
        "--no-record", action="store_true", help="judge episodes but write no trajectories"
    )


def _prepare_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", metavar="TASK", help="task.yaml")
    parser.add_argument(
        "--catalog",
        metavar="ROLE=DIR",
        action="append",
        required=True,
        help="asset catalog directory for a role (repeat per role)",
    )
    parser.add_argument("--out", metavar="DIR", required=True, help="run output directory")
    _config_flags(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Event-sourced robot demonstration collection across many object assets.",
    )
    _common(parser, db=True, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def command(name: str, handler: Callable[[argparse.Namespace], int], help: str, *,
                db: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        _common(p, db=db, top=False)
        p.set_defaults(handler=handler)
        return p

    p = command("demo", cmd_demo, "write the demo catalog and task, then prepare and collect")
    p.add_argument("--out", metavar="DIR", help="demo root (default ./assetcast-demo)")
    demo = DEMO_CONFIG
    p.add_argument(
        "--batches", type=int, default=demo.max_batches,
        help=f"batches (default {demo.max_batches})",
    )
    p.add_argument(
        "--episodes-per-batch", type=int, default=demo.episodes_per_batch,
        help=f"episodes (default {demo.episodes_per_batch})",
    )
    p.add_argument(
        "--settle-steps", type=int, default=demo.settle_steps,
        help=f"settle steps (default {demo.settle_steps})",
    )
    p.add_argument(
        "--seed", type=int, default=demo.seed,
        help=f"base seed (default {demo.seed}: its first batches include a physics rejection)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = command("catalog", cmd_catalog_missing, "procedural demo catalog; check packages", db=False)
    catalog = p.add_subparsers(dest="catalog_command", metavar="ACTION", parser_class=_Parser)
    catalog.required = True
    c = catalog.add_parser("demo", help="write the procedural demo catalog into DIR")
    _common(c, db=False, top=False)
    c.add_argument("dir", metavar="DIR")
    c.set_defaults(handler=cmd_catalog_demo)
    c = catalog.add_parser("check", help="validate every package in DIR (exit 2 if any fails)")
    _common(c, db=False, top=False)
    c.add_argument("dir", metavar="DIR")
    c.set_defaults(handler=cmd_catalog_check)

    p = command("prepare", cmd_prepare, "acquire candidates, match asset sets, write deployments")
    _prepare_flags(p)

    p = command("collect", cmd_collect, "collect episodes for a prepared run")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--episodes-per-batch", type=int, help="override the run's episodes per batch")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = command("run", cmd_run, "prepare, then collect (resume finishes both)")
    _prepare_flags(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = command("resume", cmd_resume, "finish what a failed or interrupted run set out to do")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = command("runs", cmd_runs, "list runs")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")

    p = command("show", cmd_show, "summary of one run (--json: its report)")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--json", action="store_true", help="print the run's JSON report")

    p = command("events", cmd_events, "the event log of one run")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--type", action="append", metavar="T", help="only events of type T (repeat)")
    p.add_argument("--json", action="store_true", help="JSON lines with full payloads")

    p = command("audit", cmd_audit, "per asset: runs, batches, episodes and rejections")
    p.add_argument("--json", action="store_true", help="JSON report")

    p = command("forensics", cmd_forensics, "what happened to a run: sessions, crash, failure")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--json", action="store_true", help="JSON report")

    p = command("verify", cmd_verify, "re-hash trajectories and validate deployments (exit 1)")
    p.add_argument("run_id", metavar="RUN")

    p = command("db", cmd_db, "event store schema: upgrade | current")
    p.add_argument("action", choices=["upgrade", "current"])
    return parser


# --------------------------------------------------------------------------- run commands


def collection_config(args: argparse.Namespace) -> Any:
    """A CollectionConfig from the flags given; a bad value names its flag."""
    from domain.config import CollectionConfig

    values: dict[str, Any] = {}
    for field_name, flag in CONFIG_FLAGS.items():
        value = getattr(args, flag[2:].replace("-", "_"), None)
        if value is not None:
            values[field_name] = value
    values["record_trajectory"] = not getattr(args, "no_record", False)
    try:
        return CollectionConfig(**values)
    except ConfigError as error:
        flag = CONFIG_FLAGS.get(error.path, error.path)
        detail = str(error).removeprefix(f"{error.path}: ")
        raise ConfigError(flag, detail) from None


def _prepare(args: argparse.Namespace, goal: str) -> Any:
    """Validate everything (task, catalogs, flags) before the first event is appended."""
    from runtime.prepare import new_run_id, prepare, providers_from_catalog_args
    from runtime.taskfile import load_task

    cfg = collection_config(args)
    load_task(args.task)  # task errors before the database is even opened
    providers = providers_from_catalog_args(args.catalog)
    store = open_store(db_url(args), create=True)
    run_id = new_run_id()
    args.run_id = run_id
    log.info("run_starting", run_id=run_id, goal=goal, task=str(args.task))
    result = prepare(
        args.task,
        providers,
        cfg=cfg,
        output_dir=Path(args.out),
        store=store,
        goal=goal,
        run_id=run_id,
    )
    return store, result


def _print_prepared(result: Any) -> None:
    out(f"run {result.run_id}: {len(result.deployments)} deployment(s)")
    for deployment in result.deployments:
        out(f"  batch {deployment.batch_index:04d}  {deployment.asset_set_id[:16]}  "
            f"{deployment.path}")
    out(f"preparation report: {result.report_path}")


def _print_collected(result: Any) -> None:
    accepted = sum(e.accepted for b in result.batches for e in b.episodes)
    attempted = sum(len(b.episodes) for b in result.batches)
    out(f"run {result.run_id}: {accepted}/{attempted} episodes accepted")
    out(f"report: {result.report_path}")


def cmd_prepare(args: argparse.Namespace) -> int:
    _store, result = _prepare(args, "prepare")
    _print_prepared(result)
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from runtime.collect import collect

    store, prepared = _prepare(args, "run")
    _print_prepared(prepared)
    result = collect(prepared.run_id, store=store, progress=not args.no_progress)
    _print_collected(result)
    return EXIT_OK


def cmd_collect(args: argparse.Namespace) -> int:
    from runtime.collect import collect

    if args.episodes_per_batch is not None and args.episodes_per_batch < 1:
        raise UsageError("--episodes-per-batch: must be >= 1")
    store = open_store(db_url(args))
    read_run(store, args.run_id)
    result = collect(
        args.run_id,
        store=store,
        episodes_per_batch=args.episodes_per_batch,
        progress=not args.no_progress,
    )
    _print_collected(result)
    return EXIT_OK


def cmd_resume(args: argparse.Namespace) -> int:
    from runtime.resume import resume

    store = open_store(db_url(args))
    read_run(store, args.run_id)
    result = resume(args.run_id, store=store, progress=not args.no_progress)
    if hasattr(result, "batches"):
        _print_collected(result)
    elif hasattr(result, "deployments"):
        _print_prepared(result)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from runtime.demo import DEFAULT_DEMO_ROOT, run_demo

    result = run_demo(
        Path(args.out) if args.out else DEFAULT_DEMO_ROOT,
        cfg=collection_config(args),
        db=getattr(args, "db", None),
        progress=not args.no_progress,
        on_run_id=lambda run_id: setattr(args, "run_id", run_id),
    )
    store = open_store(result.db_url)
    events = read_run(store, result.run_id)
    out(f"demo run {result.run_id} in {result.directory}")
    out(f"run output folder: {result.output_dir}")
    out(batch_table(events))
    summary = run_summary(result.run_id, events)
    out(
        f"{summary['episodes_accepted']}/{summary['episodes_attempted']} episodes accepted; "
        f"state {summary['state']}"
    )
    out(f"inspect: assetcast --db {result.db_url} show {result.run_id}")
    return EXIT_OK


# --------------------------------------------------------------------------- catalog commands


def cmd_catalog_missing(args: argparse.Namespace) -> int:  # pragma: no cover - argparse guards
    raise UsageError("catalog: choose demo or check")


def cmd_catalog_demo(args: argparse.Namespace) -> int:
    from runtime.assets.demo_catalog import write_demo_catalog

    written = write_demo_catalog(Path(args.dir))
    out(f"demo catalog: {len(written)} packages in {Path(args.dir).absolute()}")
    return EXIT_OK


def cmd_catalog_check(args: argparse.Namespace) -> int:
    from runtime.assets.demo_catalog import check_catalog

    results = check_catalog(Path(args.dir))
    failed = 0
    for check in results:
        if check.ok:
            out(f"ok    {check.path}: {check.reason}")
        else:
            failed += 1
            out(f"FAIL  {check.path}: {_one_line(check.reason)}")
    if failed:
        sys.stderr.write(f"{PROG}: error: {failed} of {len(results)} package(s) failed\n")
        return EXIT_BAD_INPUT
    return EXIT_OK


# --------------------------------------------------------------------------- queries


def _relative(path: str, base: str | None) -> str:
    """``path`` relative to the run output folder when it lies inside it."""
    if base is None:
        return path
    try:
        return str(Path(path).relative_to(base))
    except ValueError:
        return path


def batch_rows(events: Sequence[Any]) -> list[list[Any]]:
    """Per batch: asset set (role=asset_id), accepted/attempted, why episodes were rejected,
    and where its trajectories and deployment are (relative to the run's output folder)."""
    output_dir = next((e.payload["output_dir"] for e in events if e.type == "RunCreated"), None)
    resolved: dict[int, dict[str, Any]] = {}
    deployments: dict[int, str] = {}
    for event in events:
        if event.type == "BatchResolved":
            resolved[int(event.payload["batch_index"])] = event.payload
        elif event.type == "DeploymentMaterialized":
            deployments[int(event.payload["batch_index"])] = event.payload["deployment_path"]
    outcomes = episode_outcomes(events)
    rows = []
    for index in sorted(resolved):
        mine = [o for k, o in sorted(outcomes.items()) if k[0] == index]
        folders = sorted({str(Path(o["path"]).parent) for o in mine if o["committed"]})
        reasons: dict[str, int] = {}
        for o in mine:
            if not o["accepted"]:
                why = f"{o['judgement']} ({o['cause']})" if o.get("cause") else o["judgement"]
                reasons[why] = reasons.get(why, 0) + 1
        assets = resolved[index]["assets"]
        rows.append(
            [
                index,
                " ".join(f"{role}={assets[role]['asset_id']}" for role in sorted(assets)),
                f"{sum(o['accepted'] for o in mine)}/{len(mine)}",
                ", ".join(f"{r} x{n}" for r, n in sorted(reasons.items())) or "-",
                ", ".join(_relative(f, output_dir) for f in folders) or "-",
                _relative(deployments.get(index, "-"), output_dir),
            ]
        )
    return rows


def batch_table(events: Sequence[Any]) -> str:
    headers = ["batch", "asset set", "accepted", "rejected because", "trajectories", "deployment"]
    return table(headers, batch_rows(events))


def cmd_runs(args: argparse.Namespace) -> int:
    store = open_store(db_url(args))
    summaries = []
    for entry in store.list_runs():
        run_id = entry if isinstance(entry, str) else entry.run_id
        summaries.append(run_summary(run_id, list(store.read(run_id))))
    summaries.sort(key=lambda s: (s["created_at"] or "", s["run_id"]))
    if args.json:
        out(report_text(summaries))
        return EXIT_OK
    rows = [
        [
            s["run_id"],
            s["task_id"],
            s["state"],
            f"{s['batches_done']}/{s['batches_total'] if s['batches_total'] is not None else '?'}",
            f"{s['episodes_accepted']}/{s['episodes_attempted']}",
            s["last_event_at"],
        ]
        for s in summaries
    ]
    out(table(["run", "task", "state", "batches", "accepted", "last event"], rows))
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    store = open_store(db_url(args))
    events = read_run(store, args.run_id)
    if args.json:
        if any(e.type == "CollectionStarted" for e in events):
            from store.projections.collection_report import collection_report

            sys.stdout.write(report_text(collection_report(events)))
        else:
            from store.projections.preparation_report import preparation_report

            sys.stdout.write(report_text(preparation_report(events)))
        return EXIT_OK
    s = run_summary(args.run_id, events)
    for label, key in [
        ("run", "run_id"), ("task", "task_id"), ("goal", "goal"), ("state", "state"),
        ("output", "output_dir"), ("created", "created_at"), ("last event", "last_event_at"),
    ]:
        out(f"{label + ':':<12}{s[key]}")
    out(f"{'batches:':<12}{s['batches_done']} collected / {s['batches_total']} planned")
    out(
        f"{'episodes:':<12}{s['episodes_accepted']} accepted / {s['episodes_attempted']} "
        f"attempted, {s['trajectories_committed']} trajectories"
    )
    failures = [e for e in events if e.type == "RunFailed"]
    if failures:
        p = failures[-1].payload
        out(f"{'failure:':<12}{p['phase']}: {p['error_type']}: {p['detail']}")
    if s["resumes"]:
        out(f"{'resumes:':<12}{s['resumes']}")
    if any(e.type == "BatchResolved" for e in events):
        out("")
        out(batch_table(events))
        out("(paths relative to the output folder)")
    return EXIT_OK


def _compact(payload: Any, limit: int = 160) -> str:
    text = canonical_json(payload)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cmd_events(args: argparse.Namespace) -> int:
    store = open_store(db_url(args))
    events = read_run(store, args.run_id)
    wanted = {t for value in args.type or [] for t in value.split(",") if t}
    if wanted:
        from domain.events import EVENT_TYPES

        unknown = sorted(wanted - set(EVENT_TYPES))
        if unknown:
            raise UsageError(f"--type: unknown event type(s) {', '.join(unknown)}")
        events = [e for e in events if e.type in wanted]
    for event in events:
        if args.json:
            record = {
                "seq": event.seq,
                "type": event.type,
                "recorded_at": event_time(event),
                "payload": event.payload,
            }
            out(canonical_json(record))
        else:
            out(f"{event.seq:>5}  {event_time(event)}  {event.type:<22}  {_compact(event.payload)}")
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    from store.projections.audit import audit

    report = audit(open_store(db_url(args)))
    if args.json:
        sys.stdout.write(report_text(report))
        return EXIT_OK
    rows = []
    for a in report["assets"]:
        reasons = sorted({str(r["code"]) for r in a["rejections"]})
        rows.append(
            [
                a["asset_id"],
                a["content_sha256"][:12],
                ",".join(a["roles"]),
                len(a["runs"]),
                len(a["batches"]),
                f"{a['episodes_accepted']}/{a['episodes_attempted']}",
                f"{len(a['rejections'])} {' '.join(reasons)}".strip(),
            ]
        )
    out(table(["asset", "sha256", "roles", "runs", "batches", "accepted", "rejections"], rows))
    for candidate in report["unprepared_candidates"]:
        for r in candidate["rejections"]:
            out(
                f"rejected candidate {candidate['role']}/{candidate['candidate_id']} "
                f"({r['run_id']}, {r['stage']}): {r['code']}: {r['detail']}"
            )
    return EXIT_OK


def cmd_forensics(args: argparse.Namespace) -> int:
    from store.projections.forensics import forensics

    report = forensics(read_run(open_store(db_url(args)), args.run_id))
    if args.json:
        sys.stdout.write(report_text(report))
        return EXIT_OK
    last = report["last_event"]
    out(f"run {args.run_id}: {report['state']} after {report['events']} events")
    out(f"last event: #{last['seq']} {last['type']} at {last['recorded_at']}")
    for s in report["sessions"]:
        closed = s["environment_closed"]
        env = "no environment"
        if s["environment_built"]:
            env = "environment closed" if closed else "environment NOT closed"
        status = s["ended_by"] or ("running or crashed" if s["may_be_live"] else "crashed")
        out(
            f"session {s['session_id']} ({s['kind']}, pid {s['pid']} on {s['host']}, "
            f"from #{s['started']['seq']}): {status}; {env}"
        )
    episode = report["interrupted_episode"]
    if episode:
        out(
            f"interrupted episode: batch {episode['batch_index']} episode "
            f"{episode['episode_index']} reached {episode['reached']} "
            f"(last event #{episode['last_event']['seq']} {episode['last_event']['type']})"
        )
    failure = report["failure"]
    if failure:
        where = ""
        if failure.get("batch_index") is not None:
            where = f" at batch {failure['batch_index']} episode {failure.get('episode_index')}"
        out(f"failure #{failure['seq']} in {failure['phase']}{where}: "
            f"{failure['error_type']}: {failure['detail']}")
        if failure.get("traceback"):
            out(str(failure["traceback"]).rstrip())
    for r in report["resumes"]:
        out(f"resumed #{r['seq']}: {r['from_state']} -> {r['to_state']} "
            f"by session {r['session_id']}")
    for t in report["lease_takeovers"]:
        out(f"lease taken over #{t['seq']}: {t['previous_owner']} (pid {t['previous_pid']}) "
            f"-> {t['owner']} (pid {t['pid']})")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from runtime.verify import verify_events

    events = read_run(open_store(db_url(args)), args.run_id)
    result = verify_events(args.run_id, events)
    for problem in result.problems:
        out(f"problem: {problem}")
    verdict = "ok" if result.ok else f"{len(result.problems)} problem(s)"
    out(
        f"run {args.run_id}: {verdict} ({result.trajectories_checked} trajectories, "
        f"{result.deployments_checked} deployments checked)"
    )
    return EXIT_OK if result.ok else EXIT_RUN_FAILED


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


# --------------------------------------------------------------------------- entry point


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        sys.stderr.write(f"{PROG}: error: {_one_line(error)}\n")
        return EXIT_BAD_INPUT
    except SystemExit as exit_:  # --help / --version
        return int(exit_.code or 0)
    configure_logging(level=args.log_level, json_lines=args.log_json)
    try:
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
        sys.stderr.write(f"{PROG}: error: {_one_line(error)}\n")
        return EXIT_BAD_INPUT
    except AssetcastError as error:
        return _run_failed(args, error)
    except Exception as error:
        if getattr(args, "run_id", None) is None or args.handler not in _RUN_HANDLERS:
            raise
        return _run_failed(args, error)


def _run_failed(args: argparse.Namespace, error: BaseException) -> int:
    """The run recorded its failure; say so on one line and point at forensics."""
    run_id = getattr(args, "run_id", None)
    log.debug("run_failed_traceback", exc_info=error)
    where = f"run {run_id} failed" if run_id else "failed"
    sys.stderr.write(f"{PROG}: {where}: {type(error).__name__}: {_one_line(error)}\n")
    if run_id:
        sys.stderr.write(f"{PROG}: see `{PROG} forensics {run_id}`; `{PROG} resume {run_id}`\n")
    return EXIT_RUN_FAILED


_RUN_HANDLERS = {cmd_prepare, cmd_run, cmd_collect, cmd_resume, cmd_demo}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
