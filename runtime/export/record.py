"""Datasets in the log: `export` records each published version as `DatasetUpdated` in the
log of every run that contributed episodes, under that run's lease (a durable effect, so it is
fenced like any other append), and only after the files are durable."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog

from runtime.export.dataset import DatasetSpec, DatasetVersion, build_version, check_target
from runtime.export.episodes import read_source
from runtime.export.errors import NoAcceptedEpisodes
from store.records import NewEvent

log = structlog.get_logger(__name__)


def recorded_digest(events: Sequence[Any], path: str) -> str | None:
    """Digest of the latest `DatasetUpdated` for ``path`` in a run's events."""
    digest = None
    for event in events:
        if event.type == "DatasetUpdated" and event.payload["path"] == path:
            digest = event.payload["digest"]
    return digest


def needs_record(events: Sequence[Any], version: DatasetVersion) -> bool:
    return recorded_digest(events, str(version.spec.path)) != version.digest


def export_runs(store: Any, run_ids: Sequence[str], spec: DatasetSpec) -> DatasetVersion:
    """Export the committed episodes of ``run_ids`` (one task) to ``spec`` and record it.

    Every refusal (path not ours, unknown run, a run without accepted episodes, mixed tasks,
    a trajectory that fails verification, a live collector holding a run) is raised before
    the dataset is published; only temporary files are ever written before that.
    """
    from runtime.session import Session

    check_target(spec)
    sessions: list[Session] = []
    try:
        for run_id in run_ids:
            if not store.read(run_id):
                from domain.errors import UnknownRun

                raise UnknownRun(f"unknown run {run_id!r}")
            sessions.append(Session.open(store, run_id))
        source = read_source(store, run_ids)
        empty = [run.run_id for run in source.runs if not run.episodes]
        if empty:
            raise NoAcceptedEpisodes(
                f"run(s) {', '.join(empty)} have no committed accepted episode"
            )

        def fenced() -> None:
            for session in sessions:
                session.check()

        # Each run's log as the export sees it (the leases keep anyone else from appending).
        logs = [store.read(run.run_id) for run in source.runs]
        # What the log says this path holds (the same for every run it was exported from):
        # a robomimic file still holding exactly that is extended, not written whole.
        recorded = {recorded_digest(events, str(spec.path)) for events in logs}
        version = build_version(spec, source, before_publish=fenced,
                                recorded=recorded.pop() if len(recorded) == 1 else None)
        for run, session, events in zip(source.runs, sessions, logs, strict=True):
            if needs_record(events, version):
                payload = version.event_payload(run.run_id, run.log_position)
                store.append(
                    run.run_id,
                    [NewEvent("DatasetUpdated", payload)],
                    expected_version=events[-1].seq,
                    fence=session.lease,
                )
        return version
    finally:
        for session in sessions:
            try:
                session.close()
            except Exception as error:  # releasing is best effort; the lease expires anyway
                log.warning("export_lease_release_failed", error=str(error))
