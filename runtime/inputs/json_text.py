"""Strict JSON for files we did not write: duplicate keys, NaN/Infinity and deep nesting are
refused with one line naming the file.

Python's decoder recurses once per nesting level, so ``[[[[...]]]]`` a few thousand deep
(a few KB) raises ``RecursionError`` from deep inside whatever walks the value next. The depth
is therefore measured on the raw text first (strings stripped, brackets counted) and anything
deeper than ``MAX_JSON_DEPTH`` is refused before the decoder runs.
"""

from __future__ import annotations

import json
import re
from typing import Any

from domain.errors import AssetcastInputError
from domain.paths import ErrorFactory

#: Deep enough for any descriptor, snapshot or glTF document we know of (glTF is < 10).
MAX_JSON_DEPTH = 64
#: Decoded JSON costs up to ~10x its text in Python objects; a glTF's JSON (its binary data
#: lives in buffers) and every document we read are far smaller than this.
MAX_JSON_BYTES = 16 << 20

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


def json_depth(data: bytes) -> int:
    """Maximum bracket nesting of JSON text (strings ignored); malformed text still yields a
    number, the decoder then reports the syntax error."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub(b'""', data)):
        if match.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def check_json_depth(
    data: bytes, source: str, *, limit: int = MAX_JSON_DEPTH,
    error: ErrorFactory = AssetcastInputError,
) -> None:
    depth = json_depth(data)
    if depth > limit:
        raise error(f"{source}: JSON is nested {depth} levels deep, limit {limit}")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def load_json_strict(
    data: bytes, source: str, *, error: ErrorFactory = AssetcastInputError
) -> Any:
    """Decode JSON refusing oversized text, deep nesting, duplicate keys and NaN/Infinity."""
    if len(data) > MAX_JSON_BYTES:
        raise error(f"{source}: JSON is larger than {MAX_JSON_BYTES} bytes")
    check_json_depth(data, source, error=error)
    try:
        return json.loads(
            data.decode("utf-8"),
            object_pairs_hook=_reject_duplicates,
            parse_constant=_reject_constant,
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise error(f"{source}: invalid JSON: {exc}") from None
