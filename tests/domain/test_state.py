"""Folding logs: lifecycle replay, episode grammar, and the facts resume relies on."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import pytest

from domain.errors import IllegalTransition
from domain.state import RunState, fold
from tests.store.eventgen import (
    batch_started,
    collection_started,
    created,
    episode,
    legal_run,
    preparation,
)


class Ev(NamedTuple):
    seq: int
    type: str
    payload: dict


def fold_all(events: Iterable) -> RunState:
    return fold("r", [Ev(i, e.type, e.payload) for i, e in enumerate(events, start=1)])


def collecting_prefix() -> list:
    return [created("r"), *preparation(1), collection_started(), batch_started(0)]


def test_complete_run_folds_to_facts() -> None:
    st = fold_all(legal_run("r", batches=2, episodes=3))
    assert (st.state, st.phase, st.goal) == ("completed", "collection", "run")
    assert sorted(st.batches) == [0, 1] and st.batches[1].materialized
    ep = st.episodes[(0, 1)]
    assert ep.accepted and ep.committed["sha256"] == "f" * 64 and ep.reset_submitted and ep.done
    rejected = st.episodes[(0, 0)]
    assert rejected.accepted is False and rejected.discarded == "rejected" and rejected.done
    assert [s.kind for s in st.sessions] == ["PreparationStarted", "CollectionStarted"]
    assert st.environments["s1"].closed["ok"] is True


def test_version_counts_events() -> None:
    events = list(legal_run("r", batches=1, episodes=2))
    assert fold_all(events).version == len(events)


def test_replayed_illegal_event_names_run_seq_type_state() -> None:
    events = [created("r"), *preparation(1), episode(0, 0)[0]]
    with pytest.raises(
        IllegalTransition,
        match=r"run 'r' seq 6: EpisodeStarted is illegal in state prepared: accepted only in "
        r"collecting",
    ):
        fold_all(events)


def test_run_created_must_come_first_and_match_run() -> None:
    with pytest.raises(IllegalTransition, match="seq 1: PreparationStarted .* state absent"):
        fold_all(preparation(1))
    with pytest.raises(IllegalTransition, match="payload run_id 'other' does not match"):
        fold_all([created("other")])


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        # InitialChecked skipped
        (lambda ep: [ep[0], *ep[2:]], r"seq 9: EpisodeExecuted .* at stage 'started'"),
        # EpisodeExecuted missing although initial checks passed
        (lambda ep: [*ep[:2], *ep[3:]], r"EpisodeJudged .* passed its initial checks but was not"),
        # commit before judging
        (lambda ep: [*ep[:3], ep[4], ep[5]], r"TrajectoryCommitted .* at stage 'executed'"),
        # reset before commit-or-discard
        (lambda ep: [*ep[:4], ep[5]], r"ResetSubmitted .* at stage 'judged'"),
        # judged twice
        (lambda ep: [*ep[:4], ep[3]], r"EpisodeJudged .* at stage 'judged'"),
    ],
)
def test_episode_grammar_violations(mutate, message: str) -> None:
    with pytest.raises(IllegalTransition, match=message):
        fold_all([*collecting_prefix(), *mutate(episode(0, 0))])


def test_initial_check_failure_skips_execution() -> None:
    ep = episode(0, 0, accepted=False)
    ep[1].payload["passed"] = False
    st = fold_all([*collecting_prefix(), ep[0], ep[1], *ep[3:]])
    assert st.episodes[(0, 0)].executed is False and st.episodes[(0, 0)].done


def test_execution_after_failed_initial_checks_is_illegal() -> None:
    """DESIGN: EpisodeExecuted is absent exactly when the initial checks failed."""
    ep = episode(0, 0, accepted=False)
    ep[1].payload["passed"] = False
    with pytest.raises(
        IllegalTransition, match=r"EpisodeExecuted .* failed its initial checks; it cannot be"
    ):
        fold_all([*collecting_prefix(), *ep])


def test_rejected_episode_cannot_be_committed_nor_accepted_without_checks() -> None:
    ep = episode(0, 0, accepted=False)
    commit = episode(0, 0)[4]
    with pytest.raises(IllegalTransition, match="was rejected; only an accepted one"):
        fold_all([*collecting_prefix(), *ep[:4], commit])
    ep = episode(0, 0)
    ep[1].payload["passed"] = False
    with pytest.raises(IllegalTransition, match="cannot be accepted without passed initial"):
        fold_all([*collecting_prefix(), ep[0], ep[1], *ep[3:]])


def test_second_episode_while_one_is_open_is_illegal() -> None:
    with pytest.raises(IllegalTransition, match=r"episode \(0, 0\) is still open"):
        fold_all([*collecting_prefix(), *episode(0, 0, upto="EpisodeJudged"), episode(0, 1)[0]])


def test_unfinished_episode_restarts_only_in_a_new_session() -> None:
    crashed = episode(0, 0, upto="EpisodeExecuted")
    with pytest.raises(IllegalTransition, match=r"seq 9: EpisodeStarted .* \(0, 0\) is still open"):
        fold_all([*collecting_prefix(), *crashed[:1], crashed[0]])
    resumed = {
        "session_id": "s2", "host": "h", "pid": 2, "from_state": "collecting",
        "to_state": "collecting",
    }
    from store.records import NewEvent

    st = fold_all([
        *collecting_prefix(), *crashed, NewEvent("RunResumed", resumed), batch_started(0),
        *episode(0, 0),
    ])
    assert st.episodes[(0, 0)].starts == 2 and st.episodes[(0, 0)].done
    assert st.session == 3


def test_done_episode_is_never_restarted() -> None:
    with pytest.raises(IllegalTransition, match=r"episode \(0, 0\) is already done"):
        fold_all([
            *collecting_prefix(), *episode(0, 0), collection_started("s2"), episode(0, 0)[0],
        ])


def test_episode_needs_started_batch_and_resume_states_must_match() -> None:
    with pytest.raises(IllegalTransition, match="batch 3 was not started"):
        fold_all([*collecting_prefix(), *episode(3, 0)[:1]])
    from store.records import NewEvent

    wrong = {"session_id": "s", "host": "h", "pid": 1, "from_state": "collecting",
             "to_state": "prepared"}
    with pytest.raises(IllegalTransition, match="to_state 'prepared' but the run resumes to"):
        fold_all([*collecting_prefix(), NewEvent("RunResumed", wrong)])


def test_preparation_facts_for_resume() -> None:
    from store.records import NewEvent

    st = fold_all([
        created("r", goal="prepare"), NewEvent("CandidatePrepared", {
            "role": "item", "candidate_id": "c1", "asset_id": "a", "content_sha256": "s",
            "snapshot_dir": "cache/s",
        }), NewEvent("CandidateRejected", {
            "role": "item", "candidate_id": None, "stage": "prepare", "error_type": "E",
            "detail": "d",
        }),
    ])
    assert st.candidates["item"].prepared["c1"]["asset_id"] == "a"
    assert st.candidates["item"].rejected[0]["candidate_id"] is None
    assert (st.state, st.goal, st.phase) == ("preparing", "prepare", "preparation")
    with pytest.raises(IllegalTransition, match="batch 0 was never resolved"):
        fold_all([created("r"), preparation(1)[2]])
