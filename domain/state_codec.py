"""A RunState as plain JSON values and back: the body of a fold snapshot.

Why a codec of our own rather than pickle: a snapshot is read back from a database that
other tools can write, and decoding it must never run code or build objects the fold
would not build. Small structures are positional (each dataclass becomes the list of its
field values in declaration order). Episodes, the bulk of a long run, are stored by column
and each column as runs (``[value, count, step]``: ``count`` copies of a scalar, or an
arithmetic progression of ints), falling back to the plain list when runs would not be
shorter; a year of episodes whose facts mostly repeat becomes a few kilobytes plus the
seeds, and decodes with C-level loops instead of one Python call per episode.

The stored version is ``FOLD_SNAPSHOT_VERSION`` = ``FOLD_VERSION`` * 100 + ``CODEC_VERSION``:
a changed fold (``domain.state.FOLD_VERSION``) or a changed encoding (``CODEC_VERSION``
here) each make older snapshots be ignored and rebuilt, never misread. Decoding is
strict: anything that does not have exactly the expected shape raises ``SnapshotCorrupt``
and the caller falls back to folding the log.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from itertools import accumulate, compress, count, pairwise, repeat
from operator import attrgetter, ne, sub
from typing import Any

from domain.state import (
    FOLD_VERSION,
    BatchState,
    EnvironmentFacts,
    EpisodeState,
    Folder,
    RoleCandidates,
    RunState,
    Session,
)

CODEC_VERSION = 2  # 2: episodes by column, as runs
FOLD_SNAPSHOT_VERSION = FOLD_VERSION * 100 + CODEC_VERSION


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


@contextmanager
def _no_gc_pauses() -> Iterator[None]:
    """Building a long run's episodes allocates ~10^5 objects that all survive: the cyclic
    collector would scan them over and over (most of the decode time) and find nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
    body["episodes"] = _encode_episodes(list(state.episodes.values()))
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
    columns = _decode_episodes(body["episodes"])
    with _no_gc_pauses():
        episodes = map(EpisodeState, *columns)
        state.episodes = dict(zip(zip(columns[0], columns[1], strict=True), episodes, strict=True))
    if len(state.episodes) != len(columns[0]):
        raise SnapshotCorrupt("EpisodeState: two episodes with the same key")
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


_SCALARS = frozenset({type(None), bool, int, float, str})
_MAX_CODES = 64


def _runs(column: list[Any]) -> list[list[Any]] | None:
    """``[[value, count], ...]`` for the runs of equal values in ``column``, or None when
    there are too many to be shorter than the column. C-level loops: this runs on every
    snapshot write over every episode of the run."""
    n = len(column)
    starts = [0, *compress(count(1), map(ne, column[1:], column[:-1])), n]
    if 2 * (len(starts) - 1) >= n:
        return None
    return [[column[a], b - a] for a, b in pairwise(starts)]


def _encode_column(column: list[Any]) -> dict[str, Any]:
    """The shortest of: ``{"deltas": [first, [[step, count], ...]]}`` (ints: runs of equal
    differences), ``{"runs": [[value, count], ...]}`` (runs of one scalar), ``{"codes":
    [distinct...], "index": [...]}`` (few distinct scalars) and ``{"values": [...]}``.
    Runs are only ever of scalars: a dict must never come back shared between episodes."""
    kinds = set(map(type, column))
    if len(column) < 2 or not kinds <= _SCALARS:
        return {"values": column}
    if kinds == {int}:
        steps = _runs(list(map(sub, column[1:], column[:-1])))
        return {"deltas": [column[0], steps]} if steps is not None else {"values": column}
    if len(kinds & {bool, int, float}) > 1:
        return {"values": column}  # True == 1 == 1.0: runs and codes could not tell them apart
    runs = _runs(column)
    if runs is not None:
        return {"runs": runs}
    distinct = list(dict.fromkeys(column))
    if len(distinct) <= _MAX_CODES:
        code = {value: i for i, value in enumerate(distinct)}
        return {"codes": distinct, "index": list(map(code.__getitem__, column))}
    return {"values": column}


def _encode_episodes(episodes: list[EpisodeState]) -> dict[str, Any]:
    """Each EpisodeState field as a column (see :func:`_encode_column`)."""
    return {
        "count": len(episodes),
        "columns": [
            _encode_column(list(map(attrgetter(name), episodes))) for name in _EPISODE_FIELDS
        ],
    }


def _decode_episodes(body: Any) -> list[list[Any]]:
    if not isinstance(body, dict) or set(body) != {"count", "columns"}:
        raise SnapshotCorrupt("episodes: expected count and columns")
    count, encoded = body["count"], body["columns"]
    if type(count) is not int or count < 0:
        raise SnapshotCorrupt("episodes: count is not a natural number")
    if type(encoded) is not list or len(encoded) != len(_EPISODE_FIELDS):
        raise SnapshotCorrupt(f"episodes: expected {len(_EPISODE_FIELDS)} columns")
    columns = []
    for name, column in zip(_EPISODE_FIELDS, encoded, strict=True):
        try:
            values = _decode_column(column)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise SnapshotCorrupt(f"episodes: column {name} is malformed: {exc}") from exc
        if len(values) != count:
            raise SnapshotCorrupt(f"episodes: column {name} holds {len(values)} of {count}")
        columns.append(values)
    return columns


def _runs_of(runs: Any, scalar: bool) -> list[tuple[Any, int]]:
    if type(runs) is not list:
        raise TypeError("runs are not a list")
    out = []
    for run in runs:
        if type(run) is not list or len(run) != 2:
            raise TypeError("a run is not [value, count]")
        value, count = run
        if type(count) is not int or count < 1:
            raise ValueError("a run's count is not a positive integer")
        if (type(value) is not int) if not scalar else (type(value) not in _SCALARS):
            raise TypeError("a run holds a value of the wrong type")
        out.append((value, count))
    return out


def _decode_column(column: Any) -> list[Any]:
    if not isinstance(column, dict):
        raise TypeError("not an object")
    keys = set(column)
    if keys == {"values"} and type(column["values"]) is list:
        return column["values"]
    if keys == {"runs"}:
        out: list[Any] = []
        for value, count in _runs_of(column["runs"], scalar=True):
            out.extend(repeat(value, count))
        return out
    if keys == {"deltas"} and type(column["deltas"]) is list and len(column["deltas"]) == 2:
        first, steps = column["deltas"]
        if type(first) is not int:
            raise TypeError("the first value is not an integer")
        diffs: list[int] = []
        for step, count in _runs_of(steps, scalar=False):
            diffs.extend(repeat(step, count))
        return list(accumulate(diffs, initial=first))
    if keys == {"codes", "index"}:
        codes, index = column["codes"], column["index"]
        if type(codes) is not list or type(index) is not list:
            raise TypeError("codes and index are not lists")
        if any(type(value) not in _SCALARS for value in codes):
            raise TypeError("a code is not a scalar")
        if index and (set(map(type, index)) != {int} or min(index) < 0):
            raise TypeError("an index is not a natural number")
        return [codes[i] for i in index]
    raise TypeError(f"unknown column encoding {sorted(keys)}")
