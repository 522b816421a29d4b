"""JSON text byte-identical to ``json.dumps`` with ``indent``, without its pure-Python encoder.

Why: CPython's ``json`` falls back to a pure-Python generator encoder whenever ``indent`` is
set, one generator step per value. Two texts assetcast writes are big and written often:
``report.json`` lists every episode of a run (37 MB at 100k events; the report style:
``sort_keys=True, indent=2``, ASCII) and a dataset's metadata (``meta/stats.json`` is mostly
long lists of numbers; the dataset style: ``indent=4``, ``ensure_ascii=False``). One encoder
writes both, each style bound once (:func:`_encoder`): one list of parts, the C string
escaper, and a list of plain numbers encoded by the C encoder with its separators re-spaced
(the same text, since no number's text contains ``", "``). Anything it does not handle exactly
(a non-``str`` key, a subclass of a JSON type, a cycle, a float JSON refuses) is handed to
``json.dumps`` whole, so the output, or the error, is always the standard library's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring, encode_basestring_ascii
from types import GeneratorType
from typing import Any

_FLOAT = float.__repr__
_INT = int.__repr__
_INFINITY = float("inf")
_NUMBERS = (int, float)
_END = object()
_FLUSH_PARTS = 16384
# Lists of numbers at least this long go to the C encoder whole (its set-up per call costs
# more than it saves on a shorter one).
_C_LIST = 8


class _Fallback(Exception):
    """A value this encoder leaves to ``json.dumps``."""


class NotPlainJSON(ValueError):
    """The streamed value holds something only ``json.dumps`` encodes exactly (or nothing
    does): the caller encodes the whole value the ordinary way instead."""


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


Encode = Callable[[Any, str, Callable[[str], object]], None]


def _encoder(step: str, sort_keys: bool, ensure_ascii: bool) -> Encode:
    """``encode(value, indent, add)`` for one style of ``json.dumps(indent=len(step),
    sort_keys=sort_keys, ensure_ascii=ensure_ascii, allow_nan=False)``: every part of the
    text of ``value`` at nesting ``indent`` passed to ``add``, in order. A generator stands
    for a list of what it yields (consumed once; a streamed text is flushed between items)."""
    string = encode_basestring_ascii if ensure_ascii else encode_basestring
    keys = sorted if sort_keys else iter
    numbers = json.JSONEncoder(ensure_ascii=ensure_ascii, allow_nan=False).encode

    def number_list(value: Any, inner: str) -> str:
        try:
            text = numbers(value)
        except ValueError:  # nan or infinity: json.dumps raises its own error
            raise _Fallback from None
        return text[1:-1].replace(", ", ",\n" + inner)

    def encode(value: Any, indent: str, add: Any) -> None:
        kind = type(value)
        if kind is str:
            add(string(value))
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
                raise _Fallback
            add(_FLOAT(value))
        elif kind is list or kind is tuple:
            if not value:
                add("[]")
                return
            inner = indent + step
            add("[\n" + inner)
            if len(value) >= _C_LIST and all(type(item) in _NUMBERS for item in value):
                add(number_list(value, inner))
            else:
                separator = ",\n" + inner
                for position, item in enumerate(value):
                    if position:
                        add(separator)
                    encode(item, inner, add)
            add("\n" + indent + "]")
        elif kind is dict:
            if not value:
                add("{}")
                return
            if any(type(key) is not str for key in value):
                raise _Fallback  # json converts such keys (and sorts them) its own way
            inner = indent + step
            separator = ",\n" + inner
            add("{\n" + inner)
            for position, key in enumerate(keys(value)):
                if position:
                    add(separator)
                add(string(key))
                add(": ")
                encode(value[key], inner, add)
            add("\n" + indent + "}")
        elif kind is GeneratorType:
            stream(value, indent, add)
        else:
            raise _Fallback

    def stream(value: Any, indent: str, add: Any) -> None:
        sink = getattr(add, "__self__", None)
        flush = sink.flush if isinstance(sink, _Sink) else None
        first = next(value, _END)
        if first is _END:
            add("[]")
            return
        inner = indent + step
        separator = ",\n" + inner
        add("[\n" + inner)
        encode(first, inner, add)
        for item in value:
            add(separator)
            encode(item, inner, add)
            if flush is not None and len(sink) >= _FLUSH_PARTS:  # type: ignore[arg-type]
                flush()
        add("\n" + indent + "]")

    return encode


_REPORT = _encoder("  ", sort_keys=True, ensure_ascii=True)
_DATASET = _encoder("    ", sort_keys=False, ensure_ascii=False)


def _text(encode: Encode, value: Any) -> str | None:
    parts: list[str] = []
    try:
        encode(value, "", parts.append)
    except (_Fallback, RecursionError):
        return None
    return "".join(parts)


def indented_json(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, indent=2, allow_nan=False)`` (the report style)."""
    text = _text(_REPORT, value)
    if text is None:
        return json.dumps(value, sort_keys=True, indent=2, allow_nan=False)
    return text


def dataset_json(value: Any) -> str:
    """``json.dumps(value, indent=4, ensure_ascii=False, allow_nan=False)`` (the dataset
    metadata style, LeRobot's)."""
    text = _text(_DATASET, value)
    if text is None:
        return json.dumps(value, indent=4, ensure_ascii=False, allow_nan=False)
    return text


def stream_indented_json(value: Any, write: Callable[[str], object]) -> None:
    """The text of :func:`indented_json` passed to ``write`` in pieces, where ``value`` may
    hold generators standing for lists (encoded as the list of what they yield), so a
    report as long as the history is encoded with memory bounded by a piece.

    Raises NotPlainJSON (after part of the text was written) where :func:`indented_json`
    would hand the value to ``json.dumps``."""
    sink = _Sink(write)
    try:
        _REPORT(value, "", sink.append)
    except (_Fallback, RecursionError) as exc:
        raise NotPlainJSON("the value needs json.dumps") from exc
    sink.flush()
