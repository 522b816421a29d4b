"""The text of a JSON report, byte-identical to ``json.dumps(sort_keys=True, indent=2,
allow_nan=False)`` but about 2.5x faster.

Why: ``report.json`` lists every episode of a run, so it grows with the history (37 MB at
100k events), and CPython's ``json`` falls back to its pure-Python generator encoder whenever
``indent`` is set; that encoding was most of what writing the report at the end of a session
cost. This writes the same bytes with one list of parts and the C string escaper. Anything
it does not handle exactly (a non-``str`` key, a subclass of a JSON type, a cycle) is
handed to ``json.dumps`` whole, so the output never differs from the standard library's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from types import GeneratorType
from typing import Any

_INFINITY = float("inf")
_FLOAT = float.__repr__
_INT = int.__repr__


class _Fallback(Exception):
    """A value this encoder leaves to ``json.dumps``."""


def indented_json(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, indent=2, allow_nan=False)``, faster."""
    parts: list[str] = []
    try:
        _encode(value, "", parts.append)
    except (_Fallback, RecursionError):
        return json.dumps(value, sort_keys=True, indent=2, allow_nan=False)
    return "".join(parts)


class NotPlainJSON(ValueError):
    """The streamed value holds something only ``json.dumps`` encodes exactly (or nothing
    does): the caller encodes the whole value the ordinary way instead."""


_FLUSH_PARTS = 16384


class _Sink(list):
    """The parts of a streamed text, handed to ``write`` between the items of a generator
    once there are enough of them (so adding a part stays a plain ``list.append``)."""

    def __init__(self, write: Callable[[str], object]) -> None:
        super().__init__()
        self.write = write

    def flush(self) -> None:
        if self:
            self.write("".join(self))
            self.clear()


def stream_indented_json(value: Any, write: Callable[[str], object]) -> None:
    """The text of :func:`indented_json` passed to ``write`` in pieces, where ``value`` may
    hold generators standing for lists (encoded as the list of what they yield), so a
    report as long as the history is encoded with memory bounded by a piece.

    Raises NotPlainJSON (after part of the text was written) where :func:`indented_json`
    would hand the value to ``json.dumps``."""
    sink = _Sink(write)
    try:
        _encode(value, "", sink.append)
    except (_Fallback, RecursionError) as exc:
        raise NotPlainJSON("the value needs json.dumps") from exc
    sink.flush()


def _encode_stream(value: Any, indent: str, add: Any) -> None:
    """A generator as a list, consumed once (flushing a streamed text between items)."""
    sink = getattr(add, "__self__", None)
    flush = sink.flush if isinstance(sink, _Sink) else None
    first = next(value, _END)
    if first is _END:
        add("[]")
        return
    inner = indent + "  "
    separator = ",\n" + inner
    add("[\n" + inner)
    _encode(first, inner, add)
    for item in value:
        add(separator)
        _encode(item, inner, add)
        if flush is not None and len(sink) >= _FLUSH_PARTS:  # type: ignore[arg-type]
            flush()
    add("\n" + indent + "]")


_END = object()


def _encode(value: Any, indent: str, add: Any) -> None:
    kind = type(value)
    if kind is str:
        add(encode_basestring_ascii(value))
    elif value is None:
        add("null")
    elif value is True:
        add("true")
    elif value is False:
        add("false")
    elif kind is int:
        add(_INT(value))
    elif kind is float:
        if value != value or value in (_INFINITY, -_INFINITY):
            raise _Fallback  # json.dumps raises its own ValueError
        add(_FLOAT(value))
    elif kind is list or kind is tuple:
        if not value:
            add("[]")
            return
        inner = indent + "  "
        separator = ",\n" + inner
        add("[\n" + inner)
        for position, item in enumerate(value):
            if position:
                add(separator)
            _encode(item, inner, add)
        add("\n" + indent + "]")
    elif kind is dict:
        if not value:
            add("{}")
            return
        if any(type(key) is not str for key in value):
            raise _Fallback  # json converts such keys before sorting: leave it to json
        inner = indent + "  "
        separator = ",\n" + inner
        add("{\n" + inner)
        for position, key in enumerate(sorted(value)):
            if position:
                add(separator)
            add(encode_basestring_ascii(key))
            add(": ")
            _encode(value[key], inner, add)
        add("\n" + indent + "}")
    elif kind is GeneratorType:
        _encode_stream(value, indent, add)
    else:
        raise _Fallback
