"""The JSON text of a dataset's metadata files: ``json.dumps(value, indent=4)`` byte for byte.

Why not just ``json.dumps``: with ``indent`` Python's encoder is pure Python, one generator
step per number, and ``meta/stats.json`` is mostly long lists of numbers. Here a list of
numbers is encoded by the C encoder (no indent) and its separators re-spaced, which gives
the same text because no number's text contains ``", "``; everything else is indented
recursively as the standard encoder does, and any value this module does not handle
(non-string keys, other types) goes to ``json.dumps`` itself.
"""

from __future__ import annotations

import json
from typing import Any

_NUMBERS = (int, float)
_INDENT = " " * 4
_EPISODE_TEXT: dict[str, str] = {}  # an episode's compact JSON -> its indented manifest text
_EPISODE_TEXT_LIMIT = 100_000
_EPISODES_TAIL = '    "episodes": []\n}\n'


class _Unhandled(Exception):
    pass


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_STRING = json.encoder.encode_basestring  # the C function, as the standard encoder uses


def _indented(value: Any, depth: int) -> str:
    kind = type(value)
    if kind is str:
        return _STRING(value)
    if kind is dict:
        if not value:
            return "{}"
        inner = "\n" + _INDENT * (depth + 1)
        parts = []
        for key, item in value.items():
            if type(key) is not str:
                raise _Unhandled
            parts.append(_STRING(key) + ": " + _indented(item, depth + 1))
        return "{" + inner + ("," + inner).join(parts) + "\n" + _INDENT * depth + "}"
    if kind is list or kind is tuple:
        if not value:
            return "[]"
        inner = "\n" + _INDENT * (depth + 1)
        if all(type(item) in _NUMBERS for item in value):
            text = _ENCODER.encode(value)[1:-1].replace(", ", "," + inner)
        else:
            text = ("," + inner).join(_indented(item, depth + 1) for item in value)
        return "[" + inner + text + "\n" + _INDENT * depth + "]"
    if value is None or kind in (bool, int, float):
        return _ENCODER.encode(value)
    raise _Unhandled


def json_bytes(value: Any) -> bytes:
    """``json.dumps(value, indent=4, ensure_ascii=False, allow_nan=False) + "\\n"``."""
    try:
        text = _indented(value, 0)
    except _Unhandled:
        text = json.dumps(value, indent=4, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode()


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """``json_bytes(manifest)``, byte for byte, without indenting every episode again: a
    live dataset rewrites the manifest after every batch, so each episode's text (its JSON
    at the list's depth) is remembered."""
    episodes = manifest.get("episodes")
    head = json_bytes({**manifest, "episodes": []}).decode()
    if not episodes or not head.endswith(_EPISODES_TAIL):
        return json_bytes(manifest)
    if len(_EPISODE_TEXT) > _EPISODE_TEXT_LIMIT:
        _EPISODE_TEXT.clear()
    parts = []
    for episode in episodes:
        key = json.dumps(episode, ensure_ascii=False, allow_nan=False)
        text = _EPISODE_TEXT.get(key)
        if text is None:
            text = json_bytes(episode).decode()[:-1]
            text = _EPISODE_TEXT[key] = text.replace("\n", "\n" + " " * 8)
        parts.append(text)
    body = ",\n        ".join(parts)
    return (head[: -len(_EPISODES_TAIL)] + '    "episodes": [\n        ' + body
            + "\n    ]\n}\n").encode()
