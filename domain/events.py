"""Event types of the run ledger and their payload schemas.

Every payload is a flat JSON object whose key set is exact (see docs/INTERFACES.md).
Validation is a dict-and-isinstance check rather than a model object per event,
because the same check runs on every event read back from the store and a run can
hold hundreds of thousands of them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from domain.canonical import canonical_json
from domain.errors import EventSchemaError

SCHEMA_VERSION = 1
"""Payload schema version written with every event; a newer one on read is refused."""

# Field kinds. ``Any`` accepts every JSON value; ``int`` never accepts a bool.
_S, _I, _B, _L, _D, _A, _F = str, int, bool, list, dict, object, float

# type -> {field: kind}; fields listed in NULLABLE may also be null.
EVENT_FIELDS: dict[str, dict[str, Any]] = {
    "RunCreated": {
        "run_id": _S, "goal": _S, "task_id": _S, "task_path": _S, "task_sha256": _S,
        "config": _D, "providers": _D, "output_dir": _S, "tool_version": _S,
    },
    "PreparationStarted": {"session_id": _S, "host": _S, "pid": _I},
    "CandidatesListed": {"role": _S, "query": _D, "limit": _I, "candidate_ids": _L},
    "CandidateListingFailed": {"role": _S, "error_type": _S, "detail": _S},
    "CandidatePrepared": {
        "role": _S, "candidate_id": _S, "asset_id": _S, "content_sha256": _S, "snapshot_dir": _S,
    },
    "CandidateRejected": {
        "role": _S, "candidate_id": _S, "stage": _S, "error_type": _S, "detail": _S,
    },
    "BatchResolved": {
        "batch_index": _I, "seed": _I, "asset_set_id": _S, "requirements_digest": _S,
        "assets": _D, "search_nodes": _I,
    },
    "BatchUnresolvable": {
        "batch_index": _I, "seed": _I, "error_type": _S, "detail": _S, "rejections": _L,
        "role_summaries": _D, "search_nodes": _I, "budget_exhausted": _B,
    },
    "DeploymentMaterialized": {
        "batch_index": _I, "asset_set_id": _S, "deployment_path": _S, "manifest_sha256": _S,
    },
    "PreparationCompleted": {"batches": _I},
    "CollectionStarted": {
        "session_id": _S, "host": _S, "pid": _I, "episodes_per_batch": _I,
        "record_trajectory": _B, "recording_dir": _S,
    },
    "EnvironmentBuilt": {"session_id": _S, "batch_index": _I, "constructions": _I},
    "BatchStarted": {"batch_index": _I, "asset_set_id": _S, "seed": _I, "deployment_path": _S},
    "AssetsReplaced": {"batch_index": _I, "roles_replaced": _L, "entities_kept": _L},
    "EpisodeStarted": {"batch_index": _I, "episode_index": _I, "seed": _I},
    "InitialChecked": {"batch_index": _I, "episode_index": _I, "passed": _B, "checks": _L},
    "EpisodeExecuted": {
        "batch_index": _I, "episode_index": _I, "completed": _B, "steps": _I, "skills": _L,
        "detail": _S,
    },
    "EpisodeJudged": {
        "batch_index": _I, "episode_index": _I, "accepted": _B, "checks": _L, "reason": _S,
    },
    "TrajectoryCommitted": {
        "batch_index": _I, "episode_index": _I, "path": _S, "bytes": _I, "sha256": _S,
    },
    "TrajectoryDiscarded": {"batch_index": _I, "episode_index": _I, "reason": _S},
    "ResetSubmitted": {"batch_index": _I, "episode_index": _I},
    "BatchFinished": {"batch_index": _I, "accepted": _I, "attempted": _I},
    "EnvironmentClosed": {"session_id": _S, "ok": _B, "error_type": _S, "detail": _S},
    "RunCompleted": {"batches": _I, "accepted": _I, "attempted": _I},
    "RunFailed": {
        "phase": _S, "error_type": _S, "detail": _S, "traceback": _S, "batch_index": _I,
        "episode_index": _I,
    },
    "RunResumed": {"session_id": _S, "host": _S, "pid": _I, "from_state": _S, "to_state": _S},
    "DatasetUpdated": {
        "format": _S, "path": _S, "digest": _S, "files": _D, "episodes": _L,
        "total_episodes": _I, "total_frames": _I, "log_position": _I,
    },
    # resume --repair: committed files rebuilt by re-running their episodes. ``episodes``:
    # [{batch_index, episode_index, seed, deployment_path, manifest_sha256, files: [{what,
    # path, bytes, sha256, found: {bytes, sha256} | null (missing)}]}].
    "CommittedFilesRepaired": {"session_id": _S, "host": _S, "pid": _I, "episodes": _L},
    "LeaseTakenOver": {
        "previous_owner": _S, "previous_pid": _I, "previous_host": _S, "owner": _S, "pid": _I,
        "host": _S,
    },
}

# type -> {field: kind} that a payload may omit (fields added after logs already existed).
# ``TrajectoryCommitted.files``: the episode's camera files, each {camera (str or null),
# modality, path, bytes, sha256}; absent in logs written before cameras existed.
# Per-episode timing (also absent in older logs): ``EpisodeStarted.started_at`` is the
# wall-clock UTC start (``YYYY-MM-DDTHH:MM:SS.ffffffZ``) and ``reset_s`` the seeded reset;
# every ``duration_s`` is the monotonic duration in seconds of that event's phase.
OPTIONAL_FIELDS: dict[str, dict[str, Any]] = {
    # Packages the provider considered before its cap, and duplicates it listed once (issue 15).
    "CandidatesListed": {"available": _I, "duplicates": _I},
    "EpisodeStarted": {"started_at": _S, "reset_s": _F},
    "InitialChecked": {"duration_s": _F},
    "EpisodeExecuted": {"duration_s": _F},
    "EpisodeJudged": {"duration_s": _F},
    "TrajectoryCommitted": {"files": _L, "duration_s": _F},
    "ResetSubmitted": {"duration_s": _F},
    # Interleaved batches (several workers): who opened, built for and finished a batch.
    "EnvironmentBuilt": {"worker": _S},
    "BatchStarted": {"session_id": _S, "worker": _S},
    "BatchFinished": {"session_id": _S, "worker": _S},
    # --keep-rejected: the rejected episode's files kept under rejected/, each {camera (str or
    # null), modality ("trajectory" or a camera's), path, bytes, sha256}.
    "TrajectoryDiscarded": {"kept": _L},
}

NULLABLE: dict[str, frozenset[str]] = {
    "CandidateRejected": frozenset({"candidate_id"}),
    "CollectionStarted": frozenset({"recording_dir"}),
    "EnvironmentClosed": frozenset({"error_type", "detail"}),
    "RunFailed": frozenset({"batch_index", "episode_index"}),
}

ENUMS: dict[tuple[str, str], frozenset[str]] = {
    ("RunCreated", "goal"): frozenset({"prepare", "run"}),
    ("DatasetUpdated", "format"): frozenset({"lerobot", "robomimic"}),
}

EVENT_TYPES: frozenset[str] = frozenset(EVENT_FIELDS)

# Precomputed per type, so validating an event does no lookups beyond its own spec:
# (field set, ((field, kind, nullable, is_index), ...), ((field, allowed values), ...),
#  optional field set).
_FieldCheck = tuple[str, Any, bool, bool]
_SPECS: dict[
    str,
    tuple[
        frozenset[str],
        tuple[_FieldCheck, ...],
        tuple[tuple[str, frozenset[str]], ...],
        frozenset[str],
    ],
] = {
    name: (
        frozenset(fields),
        tuple(
            (f, k, f in NULLABLE.get(name, frozenset()), k is int and f.endswith("_index"))
            for f, k in {**fields, **OPTIONAL_FIELDS.get(name, {})}.items()
            if k is not _A
        ),
        tuple((f, allowed) for (etype, f), allowed in ENUMS.items() if etype == name),
        frozenset(OPTIONAL_FIELDS.get(name, {})),
    )
    for name, fields in EVENT_FIELDS.items()
}

_KIND_NAMES = {
    str: "string", int: "integer", bool: "boolean", list: "list", dict: "object",
    float: "number",
}


def _where(run_id: str | None, seq: int | None, event_type: str) -> str:
    parts = []
    if run_id is not None:
        parts.append(f"run {run_id!r}")
    if seq is not None:
        parts.append(f"seq {seq}")
    parts.append(event_type)
    return " ".join(parts)


def validate_payload(
    event_type: str,
    payload: Any,
    *,
    schema_version: int = SCHEMA_VERSION,
    run_id: str | None = None,
    seq: int | None = None,
) -> None:
    """Raise EventSchemaError unless ``payload`` is exactly what ``event_type`` declares.

    The check is strict (missing or extra keys, wrong JSON types, unknown type, future
    schema version) because a ledger that silently skips what it does not understand
    cannot be trusted for resume or audit.
    """
    spec = _SPECS.get(event_type)
    if spec is None:
        raise EventSchemaError(
            f"{_where(run_id, seq, repr(event_type))}: unknown event type"
        )
    if schema_version != SCHEMA_VERSION:
        newer = "newer than" if schema_version > SCHEMA_VERSION else "different from"
        raise EventSchemaError(
            f"{_where(run_id, seq, event_type)}: schema_version {schema_version} is {newer} "
            f"the supported version {SCHEMA_VERSION}"
        )
    if type(payload) is not dict:
        raise EventSchemaError(
            f"{_where(run_id, seq, event_type)}: payload must be a JSON object, "
            f"got {type(payload).__name__}"
        )
    keys, checks, enums, optional = spec
    if payload.keys() != keys and not (
        optional and keys <= payload.keys() and payload.keys() - keys <= optional
    ):
        missing = sorted(keys - payload.keys())
        extra = sorted(payload.keys() - keys - optional)
        detail = "; ".join(
            p for p in (
                f"missing field(s) {', '.join(missing)}" if missing else "",
                f"unknown field(s) {', '.join(extra)}" if extra else "",
            ) if p
        )
        raise EventSchemaError(f"{_where(run_id, seq, event_type)}: {detail}")
    for field, kind, nullable, is_index in checks:
        if field not in payload:  # an optional field that was left out
            continue
        value = payload[field]
        if type(value) is kind:
            if is_index and value < 0:
                raise EventSchemaError(
                    f"{_where(run_id, seq, event_type)}: field {field} must be >= 0"
                )
            continue
        if value is None and nullable:
            continue
        if kind is float and type(value) is int:  # JSON does not tell 1 from 1.0
            continue
        raise EventSchemaError(
            f"{_where(run_id, seq, event_type)}: field {field} must be "
            f"{_KIND_NAMES[kind]}{' or null' if nullable else ''}, got {type(value).__name__}"
        )
    for field, allowed in enums:
        if payload[field] not in allowed:
            raise EventSchemaError(
                f"{_where(run_id, seq, event_type)}: field {field} must be one of "
                f"{', '.join(sorted(allowed))}, got {payload[field]!r}"
            )


_DECODE = json.JSONDecoder().decode


def normalize_payload(event_type: str, payload: Mapping[str, Any]) -> tuple[dict, str]:
    """Return ``(json_payload, canonical_text)`` for a payload about to be appended.

    Round-tripping through canonical JSON turns tuples into lists and rejects values
    JSON cannot carry, so what is validated and folded at append time is byte-for-byte
    what a later reader will see. The parse also gives the fold its own deep copy
    (the fold keeps payloads, and callers may mutate theirs after appending); it costs
    about 1.3 us per event, less than any Python-level deep copy.
    """
    try:
        text = canonical_json(payload)
    except (TypeError, ValueError) as exc:
        raise EventSchemaError(f"{event_type}: payload is not JSON-serializable: {exc}") from exc
    return _DECODE(text), text
