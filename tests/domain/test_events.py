"""Payload schemas: exact key sets, JSON types, unknown types and schema versions."""

from __future__ import annotations

import pytest

from domain.errors import EventSchemaError
from domain.events import EVENT_TYPES, SCHEMA_VERSION, normalize_payload, validate_payload

GOOD_STARTED = {"batch_index": 0, "episode_index": 1, "seed": 7}


def test_every_design_event_type_has_a_schema() -> None:
    design = {
        "RunCreated", "PreparationStarted", "CandidatesListed", "CandidateListingFailed",
        "CandidatePrepared", "CandidateRejected", "BatchResolved", "BatchUnresolvable",
        "DeploymentMaterialized", "PreparationCompleted", "CollectionStarted",
        "EnvironmentBuilt", "BatchStarted", "AssetsReplaced", "EpisodeStarted",
        "InitialChecked", "EpisodeExecuted", "EpisodeJudged", "TrajectoryCommitted",
        "TrajectoryDiscarded", "ResetSubmitted", "BatchFinished", "EnvironmentClosed",
        "RunCompleted", "RunFailed", "RunResumed", "LeaseTakenOver", "DatasetUpdated",
        "CommittedFilesRepaired",
    }
    assert EVENT_TYPES == design


def test_valid_payload_passes() -> None:
    validate_payload("EpisodeStarted", dict(GOOD_STARTED))


def test_missing_and_extra_fields_are_named() -> None:
    with pytest.raises(EventSchemaError, match=r"run 'r' seq 3 EpisodeStarted: missing field"):
        validate_payload("EpisodeStarted", {"batch_index": 0, "seed": 1}, run_id="r", seq=3)
    with pytest.raises(EventSchemaError, match=r"unknown field\(s\) colour"):
        validate_payload("EpisodeStarted", {**GOOD_STARTED, "colour": "red"})


def test_wrong_type_bool_is_not_an_int() -> None:
    with pytest.raises(EventSchemaError, match="field batch_index must be integer, got bool"):
        validate_payload("EpisodeStarted", {**GOOD_STARTED, "batch_index": True})
    with pytest.raises(EventSchemaError, match="field passed must be boolean, got int"):
        validate_payload(
            "InitialChecked", {"batch_index": 0, "episode_index": 0, "passed": 1, "checks": []}
        )


def test_null_only_where_declared() -> None:
    validate_payload("TrajectoryDiscarded", {"batch_index": 0, "episode_index": 0, "reason": "x"})
    with pytest.raises(EventSchemaError, match="field reason must be string, got NoneType"):
        validate_payload(
            "TrajectoryDiscarded", {"batch_index": 0, "episode_index": 0, "reason": None}
        )
    validate_payload(
        "EnvironmentClosed", {"session_id": "s", "ok": True, "error_type": None, "detail": None}
    )


def test_negative_index_and_goal_enum() -> None:
    with pytest.raises(EventSchemaError, match="episode_index must be >= 0"):
        validate_payload("EpisodeStarted", {**GOOD_STARTED, "episode_index": -1})
    payload = {
        "run_id": "r", "goal": "explore", "task_id": "t", "task_path": "p", "task_sha256": "s",
        "config": {}, "providers": {}, "output_dir": "o", "tool_version": "v",
    }
    with pytest.raises(EventSchemaError, match="field goal must be one of prepare, run"):
        validate_payload("RunCreated", payload)


def test_unknown_type_and_future_schema_version() -> None:
    with pytest.raises(EventSchemaError, match=r"seq 9 'EpisodeTeleported': unknown event type"):
        validate_payload("EpisodeTeleported", {}, run_id="r", seq=9)
    with pytest.raises(
        EventSchemaError, match=f"schema_version {SCHEMA_VERSION + 1} is newer than"
    ):
        validate_payload("EpisodeStarted", GOOD_STARTED, schema_version=SCHEMA_VERSION + 1)


def test_normalize_turns_tuples_into_lists_and_refuses_nan() -> None:
    payload, text = normalize_payload(
        "AssetsReplaced", {"batch_index": 0, "roles_replaced": ("item",), "entities_kept": []}
    )
    assert payload["roles_replaced"] == ["item"]
    assert text == '{"batch_index":0,"entities_kept":[],"roles_replaced":["item"]}'
    with pytest.raises(EventSchemaError, match="not JSON-serializable"):
        normalize_payload("EpisodeExecuted", {"steps": float("nan")})
