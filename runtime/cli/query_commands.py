"""Read-only reports on recorded runs: runs, show, events, audit, forensics, verify.

None of them may create a database or append an event; an unknown run or a missing
database file is bad input (exit 2), never an empty report.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any

from domain.canonical import canonical_json
from domain.errors import EventSchemaError, UnknownRun
from runtime.cli.exit_codes import EXIT_OK, EXIT_RUN_FAILED, UnreadableRuns, UsageError
from runtime.cli.output import out, out_block, table
from runtime.cli.store_access import open_for_reading, read_run, require_run, unknown_run
from runtime.files import report_text


def _summary_of_row(store: Any, row: Any) -> dict[str, Any]:
    """A run's summary from its ``runs`` row (no events read); a row written before the
    counts were cached falls back to the run's snapshotted digest."""
    if not row.has_counts:
        return store.project(row.run_id, "digest").summary(row.run_id)
    return {
        "run_id": row.run_id,
        "task_id": row.task_id,
        "goal": row.goal,
        "output_dir": row.output_dir,
        "state": row.state,
        "created_at": row.created_at.isoformat(),
        "last_event_at": row.updated_at.isoformat(),
        "last_event_type": row.last_event_type,
        "version": row.version,
        "batches_total": row.batches_total,
        "batches_resolved": row.batches_resolved,
        "batches_done": row.batches_done,
        "episodes_attempted": row.episodes_attempted,
        "episodes_accepted": row.episodes_accepted,
        "trajectories_committed": row.trajectories_committed,
        "failures": row.failures,
        "resumes": row.resumes,
    }


def cmd_runs(args: argparse.Namespace) -> int:
    """From the ``runs`` table (its cached counts and head hash), so listing a year of
    history costs what its last snapshot interval costs: each run's events after its
    verified chain anchor are re-hashed against ``runs.head_hash`` (a tampered log is
    named before the table) and their payloads decoded (a corrupt row leaves its run out,
    named, exit 1); only a row from before the counts were cached folds its run."""
    from runtime.cli.chain_notice import warn_about
    from store.projections.audit import unreadable_entry

    store = open_for_reading(args)
    summaries, unreadable = [], []
    for row in store.list_runs():
        chain, broken_row = store.check_tail(row.run_id)
        warn_about(chain)
        try:
            if broken_row is not None:
                raise broken_row
            summaries.append(_summary_of_row(store, row))
        except EventSchemaError as error:
            unreadable.append(unreadable_entry(row.run_id, error))
    summaries.sort(key=lambda s: (s["created_at"] or "", s["run_id"]))
    if args.json:
        out_block(report_text(summaries))
    else:
        _runs_table(summaries)
    if unreadable:
        raise UnreadableRuns(unreadable)
    return EXIT_OK


def _runs_table(summaries: list[dict[str, Any]]) -> None:
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
    out_block(table(["run", "task", "state", "batches", "accepted", "last event"], rows))


def _project(store: Any, run_id: str, kind: str) -> Any:
    """The run's snapshotted projection ``kind``; an unknown run is bad input (exit 2).
    A broken hash chain is announced on stderr first."""
    from runtime.cli.chain_notice import warn_if_chain_broken

    warn_if_chain_broken(store, run_id)
    try:
        return store.project(run_id, kind)
    except UnknownRun:
        raise unknown_run(run_id) from None


def cmd_show(args: argparse.Namespace) -> int:
    store = open_for_reading(args)
    digest = _project(store, args.run_id, "digest")
    if args.json:
        # The full report is as long as the run's episode list: its snapshot + the tail.
        if digest.collection_started:  # streamed from its snapshot chunks + the tail
            from runtime.collection.results import print_report

            print_report(store, args.run_id, sys.stdout.write)
            return EXIT_OK
        from store.gc_pause import gc_paused

        with gc_paused():
            sys.stdout.write(report_text(store.project(args.run_id, "preparation_report").report()))
        return EXIT_OK
    s = digest.summary(args.run_id)
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
    if digest.last_failure is not None:
        p = digest.last_failure
        out(f"{'failure:':<12}{p['phase']}: {p['error_type']}: {p['detail']}")
    if s["resumes"]:
        out(f"{'resumes:':<12}{s['resumes']}")
    out(f"{'head hash:':<12}{store.head_hash(args.run_id)}")
    if digest.resolved:
        from runtime.cli.batch_table import digest_table

        out("")
        out_block(digest_table(digest))
        out("(paths relative to the output folder)")
    return EXIT_OK


def _compact(payload: Any, limit: int = 160) -> str:
    text = canonical_json(payload)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cmd_events(args: argparse.Namespace) -> int:
    from runtime.cli.chain_notice import warn_if_chain_broken
    from store.projections.audit import event_time

    store = open_for_reading(args)
    warn_if_chain_broken(store, args.run_id)
    require_run(store, args.run_id)
    events: Iterable[Any] = store.iter_events(args.run_id)
    wanted = {t for value in args.type or [] for t in value.split(",") if t}
    if wanted:
        from domain.events import EVENT_TYPES

        unknown = sorted(wanted - set(EVENT_TYPES))
        if unknown:
            raise UsageError(f"--type: unknown event type(s) {', '.join(unknown)}")
        events = (e for e in events if e.type in wanted)
    for event in events:
        if args.json:
            record = {
                "seq": event.seq,
                "type": event.type,
                "recorded_at": event_time(event),
                "payload": event.payload,
            }
            # ASCII-only JSON: valid JSON that carries no raw control character.
            out(json.dumps(record, sort_keys=True, separators=(",", ":")))
        else:
            out(f"{event.seq:>5}  {event_time(event)}  {event.type:<22}  {_compact(event.payload)}")
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    from runtime.cli.chain_notice import warn_if_chain_broken
    from store.projections.audit import audit

    store = open_for_reading(args)
    for entry in store.list_runs():
        warn_if_chain_broken(store, entry.run_id)
    report = audit(store)
    if args.json:
        sys.stdout.write(report_text(report))
    else:
        _audit_table(report)
    if report["unreadable_runs"]:
        raise UnreadableRuns(report["unreadable_runs"])
    return EXIT_OK


def _audit_table(report: dict[str, Any]) -> None:
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
                f"{a['episode_seconds'] / a['episodes_timed']:.2f}" if a["episodes_timed"] else "",
                "; ".join(f"{why} x{n}" for why, n in a["episode_rejections"].items()),
                f"{len(a['rejections'])} {' '.join(reasons)}".strip(),
            ]
        )
    out_block(table(
        ["asset", "sha256", "roles", "runs", "batches", "accepted", "s/episode",
         "episode rejections", "preparation rejections"],
        rows,
    ))
    for candidate in report["unprepared_candidates"]:
        for r in candidate["rejections"]:
            out(
                f"rejected candidate {candidate['role']}/{candidate['candidate_id']} "
                f"({r['run_id']}, {r['stage']}): {r['code']}: {r['detail']}"
            )


def cmd_forensics(args: argparse.Namespace) -> int:
    report = _project(open_for_reading(args), args.run_id, "forensics").report()
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
    in_flight = report.get("in_flight_episode")
    if in_flight:
        out(
            f"in-flight episode: batch {in_flight['batch_index']} episode "
            f"{in_flight['episode_index']} (session {in_flight['session_id']} died running it; "
            "the log holds nothing of an episode until it is done)"
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
        if failure["error_type"] == "KeyboardInterrupt":
            # Someone pressed Ctrl-C: where it stopped is the whole story, not a traceback.
            out(f"interrupted (Ctrl-C) #{failure['seq']} in {failure['phase']}{where}; "
                f"continue with: assetcast resume {args.run_id}")
        else:
            out(f"failure #{failure['seq']} in {failure['phase']}{where}: "
                f"{failure['error_type']}: {failure['detail']}")
            if failure.get("traceback"):
                out_block(str(failure["traceback"]).rstrip())
    for r in report["resumes"]:
        out(f"resumed #{r['seq']}: {r['from_state']} -> {r['to_state']} "
            f"by session {r['session_id']}")
    for t in report["lease_takeovers"]:
        out(f"lease taken over #{t['seq']}: {t['previous_owner']} (pid {t['previous_pid']}) "
            f"-> {t['owner']} (pid {t['pid']})")
    for r in report.get("repairs", ()):
        for episode in r["episodes"]:
            for f in episode["files"]:
                found = f["found"]
                was = "missing" if found is None else (
                    f"{found['bytes']} bytes, SHA-256 {found['sha256']}"
                )
                out(f"repaired #{r['seq']} by session {r['session_id']}: batch "
                    f"{episode['batch_index']} episode {episode['episode_index']} {f['what']} "
                    f"{f['path']} (was {was}; re-run with seed {episode['seed']} from "
                    f"{episode['deployment_path']})")
    return EXIT_OK


def _verify_one(
    store: Any, run_id: str, noted_head: str | None, events: list[Any] | None = None
) -> bool:
    """Chain first (it says whether the log itself can be trusted), then the files the log
    names, checked against the digests the chain carries (``events``: the log, if the
    caller already read it)."""
    from domain.errors import AssetcastError
    from runtime.verify import verify_events

    chain = store.verify_chain(run_id, noted_head=noted_head)
    problems = [] if chain.ok else [f"hash chain: {chain.problem}"]
    for note in chain.notes:
        out(f"note: {note}")
    try:
        if events is None:
            events = read_run(store, run_id, chain_notice=False)
        result = verify_events(run_id, events)
        problems.extend(result.problems)
        counts = (
            f"{result.trajectories_checked} trajectories, {result.deployments_checked} "
            f"deployments, {result.snapshots_checked} snapshots checked"
        )
    except AssetcastError as error:
        problems.append(f"log unreadable: {error}")
        counts = "files not checked"
    for problem in problems:
        out(f"problem: {problem}")
    verdict = "ok" if not problems else f"{len(problems)} problem(s)"
    chained = f"chain of {chain.events} events" + (f", head {chain.head}" if chain.ok else "")
    out(f"run {run_id}: {verdict} ({chained}; {counts})")
    return not problems


def cmd_verify(args: argparse.Namespace) -> int:
    store = open_for_reading(args)
    if args.all:
        if args.run_id is not None or args.head is not None or getattr(args, "dataset", None):
            raise UsageError(
                "--all: give either RUN (optionally with --head / --dataset) or --all"
            )
        run_ids = [entry.run_id for entry in store.list_runs()]
        logs: dict[str, list[Any]] = {}
    else:
        if args.run_id is None:
            raise UsageError("RUN: required unless --all is given")
        if args.head is not None and not _is_hash(args.head):
            raise UsageError(f"--head {args.head!r}: expected 64 hexadecimal characters")
        # an unknown run is bad input; the log read here is the one verified below
        logs = {args.run_id: read_run(store, args.run_id, chain_notice=False)}
        run_ids = [args.run_id]
        if getattr(args, "dataset", None):
            from runtime.cli.dataset_commands import require_datasets

            require_datasets(args.dataset)  # a path that is no dataset is bad input
    results = [
        _verify_one(store, run_id, args.head, logs.pop(run_id, None)) for run_id in run_ids
    ]
    if getattr(args, "dataset", None):
        from runtime.cli.dataset_commands import verify_run_datasets

        results.append(verify_run_datasets(store, run_ids[0], args.dataset))
    return EXIT_OK if all(results) else EXIT_RUN_FAILED


def _is_hash(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text)
