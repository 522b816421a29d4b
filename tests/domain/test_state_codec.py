"""The fold snapshot codec: whatever the episodes hold, decode(encode(state)) is the state,
and a body that is not exactly what the encoder writes is refused, never misread."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.canonical import canonical_json
from domain.state import FOLD_VERSION, EpisodeState, RunState
from domain.state_codec import (
    CODEC_VERSION,
    FOLD_SNAPSHOT_VERSION,
    SnapshotCorrupt,
    _decode_column,
    _encode_column,
    decode_folder,
    encode_state,
)

_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.sampled_from(["a", "b"]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.dictionaries(st.sampled_from(["path", "sha256"]), st.text(max_size=3), max_size=2),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_values, st.integers(0, 3)), max_size=40))
def test_any_column_round_trips_with_its_types(column: list) -> None:
    encoded = json.loads(canonical_json(_encode_column(list(column))))
    decoded = _decode_column(encoded)
    assert decoded == column
    assert [type(v) for v in decoded] == [type(v) for v in column]  # True never becomes 1


def _episode(b: int, e: int, **facts: object) -> EpisodeState:
    return EpisodeState(b, e, seed=(b * 31 + e * 7) % 97, session=1, started_seq=10 + 6 * e,
                        **facts)  # type: ignore[arg-type]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.sampled_from(["accepted", "x"])),
                max_size=60))
def test_run_state_round_trips_and_repeated_facts_shrink(facts: list) -> None:
    state = RunState("r", state="collecting", version=5)
    for e, (accepted, committed, reason) in enumerate(facts):
        state.episodes[(e // 7, e)] = _episode(
            e // 7, e, accepted=accepted, reason=reason, stage="reset",
            committed={"path": f"b_{e}.pt", "sha256": "f" * 64} if committed else None,
            discarded=None if committed else reason, reset_submitted=True,
        )
    body = json.loads(canonical_json(encode_state(state)))
    restored = decode_folder("r", body).state
    assert restored == state
    assert list(restored.episodes) == list(state.episodes)  # insertion order kept
    receipts = [e.committed for e in restored.episodes.values() if e.committed]
    assert len({id(r) for r in receipts}) == len(receipts)  # never one shared dict


def test_a_long_run_of_alike_episodes_is_small() -> None:
    state = RunState("r", state="collecting", version=5)
    for e in range(20_000):
        state.episodes[(0, e)] = _episode(0, e, stage="reset", accepted=True, judged=True,
                                          reason="accepted", discarded="recording_disabled")
    text = canonical_json(encode_state(state))
    assert len(text) < 200_000  # ~10 bytes per episode (the seeds), not ~100
    assert decode_folder("r", json.loads(text)).state == state


def test_the_stored_version_follows_the_fold_and_the_codec() -> None:
    assert FOLD_SNAPSHOT_VERSION == FOLD_VERSION * 100 + CODEC_VERSION


@pytest.mark.parametrize("columns", [
    "rows",  # the codec-1 layout: a list of rows
    {"count": 1, "columns": [{"values": [0]}] * 15},  # one column short
    {"count": 2, "columns": [{"values": [0]}] * 16},  # count disagrees
    {"count": 1, "columns": [{"runs": [[{"a": 1}, 1]]}] * 16},  # a run of a dict
    {"count": 1, "columns": [{"deltas": [0.5, []]}] * 16},
    {"count": 1, "columns": [{"codes": [1], "index": [3]}] * 16},
    {"count": 1, "columns": [{"codes": [1], "index": [-1]}] * 16},
    {"count": 1, "columns": [{"zip": "..."}] * 16},
])
def test_malformed_episode_columns_are_refused(columns: object) -> None:
    body = json.loads(canonical_json(encode_state(RunState("r", state="collecting", version=5))))
    body["episodes"] = [[0] * 16] if columns == "rows" else columns
    with pytest.raises(SnapshotCorrupt):
        decode_folder("r", body)
