"""Folding logs: lifecycle replay, episode grammar, and the facts resume relies on."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import pytest

from domain.errors import IllegalTransition
from domain.state import RunState, fold
from store.records import NewEvent
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


# -- interleaved batches (several workers, issue 14) ------------------------------------------


def _started_by(b: int, worker: str, session: str = "s1") -> object:
    from store.records import NewEvent

    event = batch_started(b)
    return NewEvent("BatchStarted", {**event.payload, "session_id": session, "worker": worker})


def _finished_by(b: int, worker: str, session: str = "s1", attempted: int = 2) -> object:
    from store.records import NewEvent

    return NewEvent("BatchFinished", {
        "batch_index": b, "accepted": 0, "attempted": attempted, "session_id": session,
        "worker": worker,
    })


def _two_workers_prefix() -> list:
    return [
        created("r"), *preparation(2), collection_started(episodes_per_batch=2),
        _started_by(0, "w0"), _started_by(1, "w1"),
    ]


def test_two_batches_in_flight_interleave_event_by_event() -> None:
    """Each batch keeps its own grammar position: batch 1's episode may start while batch
    0's is open, and their events may interleave one by one."""
    a, b = episode(0, 0), episode(1, 0)
    mixed = [event for pair in zip(a, b, strict=True) for event in pair]
    st = fold_all([
        *_two_workers_prefix(), *mixed, *episode(1, 1), *episode(0, 1),
        _finished_by(1, "w1"), _finished_by(0, "w0"),
    ])
    assert st.open_episode is None and st.open_episodes == {}
    assert all(st.episodes[(b_, e)].done for b_ in (0, 1) for e in (0, 1))
    assert st.batches[0].started_by == {"session_id": "s1", "worker": "w0"}
    assert st.batches_finished == 2


def test_one_batch_still_follows_the_grammar_while_another_interleaves() -> None:
    a = episode(0, 0)
    with pytest.raises(IllegalTransition, match=r"episode \(0, 0\) is still open"):
        fold_all([*_two_workers_prefix(), *a[:3], *episode(1, 0), episode(0, 1)[0]])
    with pytest.raises(
        IllegalTransition, match=r"episode \(1, 0\) is not the open episode of batch 1 \(None\)"
    ):
        fold_all([*_two_workers_prefix(), *a[:2], episode(1, 0)[1]])


def test_batch_cannot_finish_or_restart_with_its_episode_open() -> None:
    open_ep = episode(0, 0, upto="EpisodeJudged")
    with pytest.raises(IllegalTransition, match=r"BatchFinished .* \(0, 0\) is still open"):
        fold_all([*_two_workers_prefix(), *open_ep, _finished_by(0, "w0")])
    with pytest.raises(IllegalTransition, match=r"BatchStarted .* \(0, 0\) is still open"):
        fold_all([*_two_workers_prefix(), *open_ep, _started_by(0, "w2")])
    # the other batch is not held up by it
    st = fold_all(
        [*_two_workers_prefix(), *open_ep, *episode(1, 0), _finished_by(1, "w1", attempted=1)]
    )
    assert st.open_episodes == {0: 0} and st.batches[1].finished is not None


def test_run_cannot_complete_while_any_batch_has_an_open_episode() -> None:
    from store.records import NewEvent

    completed = NewEvent("RunCompleted", {"batches": 2, "accepted": 0, "attempted": 1})
    with pytest.raises(IllegalTransition, match=r"RunCompleted .* \(1, 0\) is still open"):
        fold_all([*_two_workers_prefix(), *episode(1, 0, upto="EpisodeJudged"), completed])


def test_batch_events_name_the_current_session_and_the_worker_that_opened_it() -> None:
    with pytest.raises(IllegalTransition, match=r"session_id 's9' is not the current session 's1'"):
        fold_all([*_two_workers_prefix(), _started_by(0, "w0", session="s9")])
    with pytest.raises(IllegalTransition, match=r"batch 0 was started by worker 'w0', not 'w1'"):
        fold_all([*_two_workers_prefix(), *episode(0, 0), *episode(0, 1), _finished_by(0, "w1")])


def test_a_batch_re_dispatched_to_another_worker_is_finished_by_that_worker() -> None:
    """A worker died after episode 0: its batch re-opens on another worker in the same
    session, which runs episode 1 and finishes it."""
    st = fold_all([
        *_two_workers_prefix(), *episode(0, 0), _started_by(0, "w2"), *episode(0, 1),
        _finished_by(0, "w2"),
    ])
    assert st.batches[0].started == 2 and st.batches[0].finished["worker"] == "w2"


def test_a_new_session_abandons_every_open_episode() -> None:
    from store.records import NewEvent

    resumed = NewEvent("RunResumed", {
        "session_id": "s2", "host": "h", "pid": 2, "from_state": "collecting",
        "to_state": "collecting",
    })
    st = fold_all([
        *_two_workers_prefix(), *episode(0, 0, upto="EpisodeJudged"),
        *episode(1, 0, upto="InitialChecked"), resumed,
    ])
    assert st.open_episodes == {}
    st = fold_all([
        *_two_workers_prefix(), *episode(0, 0, upto="EpisodeJudged"), resumed,
        _started_by(0, "w0", session="s2"), *episode(0, 0),
    ])
    assert st.episodes[(0, 0)].starts == 2


def test_a_snapshot_taken_with_two_batches_open_resumes_the_fold_exactly() -> None:
    """The codec keeps every batch's grammar position (FOLD_VERSION 3)."""
    import json

    from domain.state import FOLD_VERSION, Folder
    from domain.state_codec import decode_folder, encode_state

    assert FOLD_VERSION >= 3
    head = [*_two_workers_prefix(), *episode(0, 0, upto="EpisodeExecuted"),
            *episode(1, 0, upto="InitialChecked")]
    tail = [*episode(0, 0)[3:], *episode(1, 0)[2:], *episode(0, 1), *episode(1, 1),
            _finished_by(0, "w0"), _finished_by(1, "w1")]
    folder = Folder("r")
    for i, e in enumerate(head, start=1):
        folder.apply(i, e.type, e.payload)
    assert folder.state.open_episodes == {0: 0, 1: 0}
    restored = decode_folder("r", json.loads(json.dumps(encode_state(folder.state))))
    for i, e in enumerate(tail, start=len(head) + 1):
        restored.apply(i, e.type, e.payload)
    assert restored.state == fold_all([*head, *tail])


def _repair(b: int, e: int, **file: object) -> object:
    restored = {"what": "trajectory", "path": f"ep_{b}_{e}.json", "bytes": 10,
                "sha256": "f" * 64, "found": None, **file}
    return NewEvent("CommittedFilesRepaired", {
        "session_id": "s9", "host": "h", "pid": 1, "episodes": [{
            "batch_index": b, "episode_index": e, "seed": 1000 * b + e,
            "deployment_path": "batch_0", "manifest_sha256": "a" * 64, "files": [restored],
        }],
    })


def test_a_repair_is_legal_after_completion_and_names_only_committed_receipts() -> None:
    # legal_run: episodes (b, e) with e % 3 != 0 are committed, e % 3 == 0 rejected.
    events = list(legal_run("r", batches=1, episodes=2))
    st = fold_all([*events, _repair(0, 1)])
    assert (st.state, st.last_event_type) == ("completed", "CommittedFilesRepaired")
    assert st.episodes[(0, 1)].committed["sha256"] == "f" * 64  # the receipt stands
    n = len(events) + 1
    with pytest.raises(IllegalTransition, match=rf"seq {n}: .*episode \(0, 0\) is not committed"):
        fold_all([*events, _repair(0, 0)])
    with pytest.raises(IllegalTransition, match=r"differs from its committed receipt"):
        fold_all([*events, _repair(0, 1, sha256="0" * 64)])
    with pytest.raises(IllegalTransition, match=r"'other\.pt' is not one of its committed files"):
        fold_all([*events, _repair(0, 1, path="other.pt")])
    with pytest.raises(IllegalTransition, match=r"accepted only in collecting, completed, failed"):
        fold_all([created("r"), *preparation(1), _repair(0, 1)])
