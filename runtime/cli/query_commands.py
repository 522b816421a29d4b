"""Read-only reports on recorded runs: runs, show, events, audit, forensics, verify.

None of them may create a database or append an event; an unknown run or a missing
database file is bad input (exit 2), never an empty report.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from domain.canonical import canonical_json
from runtime.cli.batch_table import batch_table
from runtime.cli.exit_codes import EXIT_OK, EXIT_RUN_FAILED, UnreadableRuns, UsageError
from runtime.cli.output import out, out_block, table
from runtime.cli.store_access import open_for_reading, read_run
from runtime.files import report_text
from store.projections.audit import event_time, read_logs, run_summary


def cmd_runs(args: argparse.Namespace) -> int:
    logs, unreadable = read_logs(open_for_reading(args))
    summaries = [run_summary(run_id, list(events)) for run_id, events in logs.items()]
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


def cmd_show(args: argparse.Namespace) -> int:
    store = open_for_reading(args)
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
        out_block(batch_table(events))
        out("(paths relative to the output folder)")
    return EXIT_OK


def _compact(payload: Any, limit: int = 160) -> str:
    text = canonical_json(payload)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cmd_events(args: argparse.Namespace) -> int:
    store = open_for_reading(args)
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
            # ASCII-only JSON: valid JSON that carries no raw control character.
            out(json.dumps(record, sort_keys=True, separators=(",", ":")))
        else:
            out(f"{event.seq:>5}  {event_time(event)}  {event.type:<22}  {_compact(event.payload)}")
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    from store.projections.audit import audit

    report = audit(open_for_reading(args))
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
                f"{len(a['rejections'])} {' '.join(reasons)}".strip(),
            ]
        )
    out_block(
        table(["asset", "sha256", "roles", "runs", "batches", "accepted", "rejections"], rows)
    )
    for candidate in report["unprepared_candidates"]:
        for r in candidate["rejections"]:
            out(
                f"rejected candidate {candidate['role']}/{candidate['candidate_id']} "
                f"({r['run_id']}, {r['stage']}): {r['code']}: {r['detail']}"
            )


def cmd_forensics(args: argparse.Namespace) -> int:
    from store.projections.forensics import forensics

    report = forensics(read_run(open_for_reading(args), args.run_id))
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
            out_block(str(failure["traceback"]).rstrip())
    for r in report["resumes"]:
        out(f"resumed #{r['seq']}: {r['from_state']} -> {r['to_state']} "
            f"by session {r['session_id']}")
    for t in report["lease_takeovers"]:
        out(f"lease taken over #{t['seq']}: {t['previous_owner']} (pid {t['previous_pid']}) "
            f"-> {t['owner']} (pid {t['pid']})")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from runtime.verify import verify_events

    events = read_run(open_for_reading(args), args.run_id)
    result = verify_events(args.run_id, events)
    for problem in result.problems:
        out(f"problem: {problem}")
    verdict = "ok" if result.ok else f"{len(result.problems)} problem(s)"
    out(
        f"run {args.run_id}: {verdict} ({result.trajectories_checked} trajectories, "
        f"{result.deployments_checked} deployments checked)"
    )
    return EXIT_OK if result.ok else EXIT_RUN_FAILED
