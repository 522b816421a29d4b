"""A RunState as plain JSON values and back: the body of a fold snapshot.

Why a codec of our own rather than pickle: a snapshot is read back from a database that
other tools can write, and decoding it must never run code or build objects the fold
would not build. The encoding is positional (each dataclass becomes the list of its
field values in declaration order), which keeps a snapshot of a long run compact; any
change to those dataclasses must bump ``FOLD_VERSION`` so older snapshots are ignored.
Decoding is strict: anything that does not have exactly the expected shape raises
``SnapshotCorrupt`` and the caller falls back to folding the log.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from domain.state import (
    BatchState,
    EnvironmentFacts,
    EpisodeState,
    Folder,
    RoleCandidates,
    RunState,
    Session,
)


class SnapshotCorrupt(ValueError):
    """A stored snapshot body that does not decode to a RunState."""


_EPISODE_FIELDS = tuple(f.name for f in fields(EpisodeState))
_BATCH_FIELDS = tuple(f.name for f in fields(BatchState))
_SESSION_FIELDS = tuple(f.name for f in fields(Session))
_ENV_FIELDS = tuple(f.name for f in fields(EnvironmentFacts))
_ROLE_FIELDS = tuple(f.name for f in fields(RoleCandidates))
# RunState fields stored as they are (JSON values already).
_PLAIN_FIELDS = (
    "state", "version", "failed_from", "created", "collection", "preparation_completed",
    "completed", "failures", "lease_takeovers", "datasets", "first_collection", "last_event_type",
    "resumes", "batches_resolved", "batches_finished", "episodes_done", "episodes_accepted",
    "trajectories_committed",
)
_ALL_FIELDS = frozenset(f.name for f in fields(RunState))
_STRUCTURED = frozenset(
    {"run_id", "batches", "episodes", "candidates", "sessions", "environments", "open_episodes"}
)
if _ALL_FIELDS != _STRUCTURED | set(_PLAIN_FIELDS):  # pragma: no cover - import-time guard
    raise RuntimeError("state_codec does not cover every RunState field; update it")


def _row(obj: Any, names: tuple[str, ...]) -> list[Any]:
    return [getattr(obj, name) for name in names]


def _build(cls: type, names: tuple[str, ...], values: Any) -> Any:
    # Positional: the dataclasses' field order is their __init__ order (and the encoding's).
    if type(values) is not list or len(values) != len(names):
        raise SnapshotCorrupt(f"{cls.__name__}: expected {len(names)} values")
    return cls(*values)


def encode_state(state: RunState) -> dict[str, Any]:
    """``state`` as JSON values (dict keys are strings, tuples become lists)."""
    body: dict[str, Any] = {name: getattr(state, name) for name in _PLAIN_FIELDS}
    body["open_episodes"] = [[b, j] for b, j in sorted(state.open_episodes.items())]
    body["batches"] = [_row(b, _BATCH_FIELDS) for _, b in sorted(state.batches.items())]
    body["episodes"] = [_row(e, _EPISODE_FIELDS) for e in state.episodes.values()]
    body["candidates"] = {role: _row(c, _ROLE_FIELDS) for role, c in state.candidates.items()}
    body["sessions"] = [_row(s, _SESSION_FIELDS) for s in state.sessions]
    body["environments"] = [_row(e, _ENV_FIELDS) for e in state.environments.values()]
    return body


def decode_folder(run_id: str, body: Any) -> Folder:
    """A Folder positioned where ``body`` (from :func:`encode_state`) left the run."""
    try:
        return _decode(run_id, body)
    except SnapshotCorrupt:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SnapshotCorrupt(f"snapshot of run {run_id!r} does not decode: {exc}") from exc


def _decode(run_id: str, body: Any) -> Folder:
    if not isinstance(body, dict) or set(body) != _ALL_FIELDS - {"run_id"}:
        raise SnapshotCorrupt(f"snapshot of run {run_id!r} has unexpected fields")
    state = RunState(run_id, **{name: body[name] for name in _PLAIN_FIELDS})
    if not isinstance(state.version, int) or not isinstance(state.state, str):
        raise SnapshotCorrupt("version/state have the wrong type")
    for pair in body["open_episodes"]:
        if type(pair) is not list or len(pair) != 2:
            raise SnapshotCorrupt("open_episodes: expected [batch, episode] pairs")
        state.open_episodes[int(pair[0])] = int(pair[1])
    for values in body["batches"]:
        batch = _build(BatchState, _BATCH_FIELDS, values)
        state.batches[batch.batch_index] = batch
    width, episodes = len(_EPISODE_FIELDS), state.episodes
    for values in body["episodes"]:  # the bulk of a long run: _build inlined
        if type(values) is not list or len(values) != width:
            raise SnapshotCorrupt(f"EpisodeState: expected {width} values")
        episode = EpisodeState(*values)
        episodes[(episode.batch_index, episode.episode_index)] = episode
    for role, values in body["candidates"].items():
        state.candidates[role] = _build(RoleCandidates, _ROLE_FIELDS, values)
    state.sessions = [_build(Session, _SESSION_FIELDS, values) for values in body["sessions"]]
    for values in body["environments"]:
        facts = _build(EnvironmentFacts, _ENV_FIELDS, values)
        state.environments[facts.session_id] = facts
    folder = Folder(run_id)
    folder.lifecycle.restore(state.state, state.failed_from)
    folder.state = state
    return folder
