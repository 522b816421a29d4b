"""Collection: a run's prepared batches executed on workers, recorded by one driver.

Modules, one purpose each: ``collect_prepared`` (the entry point ``collect``: refusals
before the lease, the lease taken and released), ``session_run`` (one session under a held
lease: inputs checked, the pass run, the report written; shared with resume), ``driver``
(the session's pass, single writer of the log and of committed files), ``session_ledger``
(the driver's appends: position tags, deferred events, the live-dataset hook, appends after
a failure), ``session_events`` (the session's own events), ``session_endings`` (closing the
environment, recording `RunCompleted` or `RunFailed`), ``episode_log`` (an episode's log
lines, once durable), ``plan`` (what is left to do, from the log), ``episode`` (one episode on a
worker's environment), ``commit`` (an episode's files made durable, its events assembled),
``ledger`` (the pipelined append thread), ``recordings`` (files on disk versus the log),
``refusals`` (bad input refused before anything is recorded), ``results`` (what a session
returns), ``environment`` (the environment factory), ``progress``, ``demo_run`` (a small
prepared demo run for tests and benchmarks), and ``executors/`` (where episodes run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.lazy_exports import lazy_exports

# Loaded on first use (PEP 562): a command that needs one small module of the package
# (``verify`` reads ``recordings``) must not import the driver, the task model and the
# executors with it.
_EXPORTS = {
    "LEDGER_PIPELINE_DEPTH": "runtime.collection.session_ledger",
    "collect": "runtime.collection.collect_prepared",
    "end_session": "runtime.collection.collect_prepared",
    "run_collection": "runtime.collection.session_run",
    "EnvironmentFactory": "runtime.collection.environment",
    "default_environment_factory": "runtime.collection.environment",
    "CollectionRefused": "runtime.collection.plan",
    "refuse_bad_collection_input": "runtime.collection.refusals",
    "REPORT_NAME": "runtime.collection.results",
    "BatchOutcome": "runtime.collection.results",
    "CollectionResult": "runtime.collection.results",
    "EpisodeOutcome": "runtime.collection.results",
}

if TYPE_CHECKING:
    from runtime.collection.collect_prepared import collect, end_session
    from runtime.collection.environment import EnvironmentFactory, default_environment_factory
    from runtime.collection.plan import CollectionRefused
    from runtime.collection.refusals import refuse_bad_collection_input
    from runtime.collection.results import (
        REPORT_NAME,
        BatchOutcome,
        CollectionResult,
        EpisodeOutcome,
    )
    from runtime.collection.session_ledger import LEDGER_PIPELINE_DEPTH
    from runtime.collection.session_run import run_collection


__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = [
    "LEDGER_PIPELINE_DEPTH",
    "REPORT_NAME",
    "BatchOutcome",
    "CollectionRefused",
    "CollectionResult",
    "EnvironmentFactory",
    "EpisodeOutcome",
    "collect",
    "default_environment_factory",
    "end_session",
    "refuse_bad_collection_input",
    "run_collection",
]
