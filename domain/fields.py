"""Strict readers for untrusted mappings (task files, configs), with file paths in errors.

Every reader takes the dotted path of the value inside its document (``scene.entities[1].yaw``)
and the document's name, so a user sees exactly which line of which file to fix. Numbers are
exact-typed on purpose: YAML turns ``yes`` into ``True`` and ``True`` is an ``int`` in Python,
so a bool is never accepted where a number is expected (and vice versa).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from domain.errors import ConfigError

JsonScalar = str | int | float | bool | None

#: Invisible characters that reorder text on a terminal ("Trojan Source", CVE-2021-42574).
_BIDI_CONTROLS = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                           "\u2066\u2067\u2068\u2069")


def forbidden_character(value: str) -> str | None:
    """The first character of ``value`` that must never appear in a name, else ``None``.

    Names (ids, roles, categories, folder names) are printed in tables and logs; a newline
    forges a row, ESC/CSI (C0, C1) repaints the terminal, DEL and line/paragraph separators
    and bidi overrides disguise text. Refusing them where names enter keeps output honest.
    """
    for char in value:
        if char in _BIDI_CONTROLS or unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            return char
    return None


def _check_name_characters(value: str, path: str, source: str | None) -> None:
    bad = forbidden_character(value)
    if bad is not None:
        fail(path, f"must not contain control characters (found {bad!r})", source)


def key_path(path: str, key: str) -> str:
    """Dotted path of ``key`` below ``path`` (the root has an empty path)."""
    return f"{path}.{key}" if path else key


def index_path(path: str, index: int) -> str:
    return f"{path}[{index}]"


def fail(path: str, message: str, source: str | None) -> NoReturn:
    raise ConfigError(path, message, source=source)


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def mapping(
    value: Any,
    path: str,
    source: str | None,
    *,
    required: Sequence[str] = (),
    optional: Sequence[str] = (),
) -> Mapping[str, Any]:
    """A mapping with string keys, exactly the ``required`` keys and some of ``optional``."""
    if not isinstance(value, Mapping):
        fail(path, f"expected a mapping, got {type_name(value)}", source)
    allowed = set(required) | set(optional)
    for key in value:
        if not isinstance(key, str):
            fail(path, f"keys must be strings, got {type_name(key)} {key!r}", source)
        _check_name_characters(key, path, source)
        if allowed and key not in allowed:
            fail(key_path(path, key), "unknown key", source)
    for key in required:
        if key not in value:
            fail(key_path(path, key), "required key is missing", source)
    return value


def string_keyed(value: Any, path: str, source: str | None) -> Mapping[str, Any]:
    """A mapping whose keys are free-form (role names, aliases), still strings."""
    return mapping(value, path, source)


def text(value: Any, path: str, source: str | None) -> str:
    """A non-empty string without surrounding whitespace."""
    if not isinstance(value, str):
        fail(path, f"expected a string, got {type_name(value)}", source)
    if not value or value.strip() != value:
        fail(path, "must be a non-empty string without surrounding whitespace", source)
    _check_name_characters(value, path, source)
    return value


def optional_text(value: Any, path: str, source: str | None) -> str | None:
    return None if value is None else text(value, path, source)


def number(
    value: Any,
    path: str,
    source: str | None,
    *,
    positive: bool = False,
    non_negative: bool = False,
) -> float:
    """A finite real number (int or float, never bool), returned as float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        fail(path, f"expected a number, got {type_name(value)}", source)
    result = float(value)
    if not math.isfinite(result):
        fail(path, "must be finite", source)
    if positive and result <= 0.0:
        fail(path, f"must be > 0, got {result!r}", source)
    if non_negative and result < 0.0:
        fail(path, f"must be >= 0, got {result!r}", source)
    return result


def integer(value: Any, path: str, source: str | None, *, lower: int, upper: int) -> int:
    """A real ``int`` (not bool) within ``[lower, upper]``."""
    if type(value) is not int:
        fail(path, f"expected an integer, got {type_name(value)}", source)
    if not lower <= value <= upper:
        fail(path, f"must be an integer in [{lower}, {upper}], got {value}", source)
    return value


def boolean(value: Any, path: str, source: str | None) -> bool:
    if type(value) is not bool:
        fail(path, f"expected a bool, got {type_name(value)}", source)
    return value


def sequence(value: Any, path: str, source: str | None) -> Sequence[Any]:
    """A list (YAML sequence); strings and mappings are refused."""
    if not isinstance(value, list | tuple):
        fail(path, f"expected a list, got {type_name(value)}", source)
    return value


def numbers(
    value: Any,
    path: str,
    source: str | None,
    *,
    arity: int,
    positive: bool = False,
) -> tuple[float, ...]:
    items = sequence(value, path, source)
    if len(items) != arity:
        fail(path, f"expected {arity} numbers, got {len(items)}", source)
    return tuple(
        number(item, index_path(path, i), source, positive=positive) for i, item in enumerate(items)
    )


def text_list(value: Any, path: str, source: str | None) -> tuple[str, ...]:
    """A list of distinct non-empty strings, order preserved."""
    raw = sequence(value, path, source)
    items = tuple(text(item, index_path(path, i), source) for i, item in enumerate(raw))
    seen: set[str] = set()
    for i, item in enumerate(items):
        if item in seen:
            fail(index_path(path, i), f"duplicate entry {item!r}", source)
        seen.add(item)
    return items


def scalar(value: Any, path: str, source: str | None) -> JsonScalar:
    """A JSON scalar; floats must be finite (digests and ledgers reject NaN)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            fail(path, "must be finite", source)
        return value
    fail(path, f"expected a string, number, bool or null, got {type_name(value)}", source)


def json_value(value: Any, path: str, source: str | None) -> Any:
    """Any JSON value (for free-form ``params``), copied into plain dicts and lists."""
    if isinstance(value, Mapping):
        return {
            key: json_value(item, key_path(path, key), source)
            for key, item in string_keyed(value, path, source).items()
        }
    if isinstance(value, list | tuple):
        return [json_value(item, index_path(path, i), source) for i, item in enumerate(value)]
    return scalar(value, path, source)
