"""Strict decoding of the JSON that asset descriptors arrive in.

Descriptors come from files written by people and tools we do not control and feed content
digests, so every helper here refuses instead of repairing: an unknown field, a missing one, a
non-finite number, a control character in a name is one ``AssetValidationError`` naming the
field (and the file when known). ``FrozenMap`` keeps what was decoded immutable and hashable.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from domain.errors import AssetValidationError
from domain.fields import forbidden_character

JsonScalar = str | int | float | bool


class FrozenMap(Mapping[str, Any]):
    """Read-only, hashable, picklable mapping (``MappingProxyType`` cannot be copied)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data = dict(data or {})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(tuple(self._data.items()))

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (self._data,))


def field_error(path: str, message: str, source: str | None) -> AssetValidationError:
    where = f"{source}: " if source else ""
    return AssetValidationError(f"{where}{path}: {message}")


def require_mapping(value: Any, path: str, source: str | None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise field_error(path, f"expected an object, got {type(value).__name__}", source)
    for key in value:
        if not isinstance(key, str):
            raise field_error(path, f"keys must be strings, got {key!r}", source)
    return value


def check_keys(
    value: Mapping[str, Any],
    path: str,
    source: str | None,
    *,
    required: Iterable[str] = (),
    optional: Iterable[str] = (),
) -> None:
    required = tuple(required)
    allowed = set(required) | set(optional)
    for key in sorted(value):
        if key not in allowed:
            raise field_error(f"{path}.{key}", "unknown field", source)
    for key in required:
        if key not in value:
            raise field_error(f"{path}.{key}", "required field is missing", source)


def finite(value: Any, path: str, source: str | None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise field_error(path, f"expected a number, got {type(value).__name__}", source)
    number = float(value)
    if not math.isfinite(number):
        raise field_error(path, f"must be finite, got {value!r}", source)
    return number


def nonempty_str(value: Any, path: str, source: str | None) -> str:
    """A name (asset id, category, capability): printed in tables, so no control chars."""
    if not isinstance(value, str) or not value.strip():
        raise field_error(path, "expected a nonempty string", source)
    bad = forbidden_character(value)
    if bad is not None:
        raise field_error(path, f"must not contain control characters (found {bad!r})", source)
    return value


def freeze_json(value: Any, path: str, source: str | None) -> Any:
    """Validate a JSON value (finite numbers, string keys) and make it immutable."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        return value if isinstance(value, int) else finite(value, path, source)
    if isinstance(value, Mapping):
        require_mapping(value, path, source)
        return FrozenMap(
            {k: freeze_json(v, f"{path}.{k}", source) for k, v in sorted(value.items())}
        )
    if isinstance(value, list | tuple):
        return tuple(freeze_json(v, f"{path}[{i}]", source) for i, v in enumerate(value))
    raise field_error(path, f"not a JSON value: {type(value).__name__}", source)


def thaw_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: thaw_json(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw_json(v) for v in value]
    return value


def decode_attributes(value: Any, path: str, source: str | None) -> Mapping[str, JsonScalar]:
    mapping = require_mapping(value, path, source)
    out: dict[str, JsonScalar] = {}
    for key in sorted(mapping):
        item = mapping[key]
        if not key:
            raise field_error(path, "attribute names must be nonempty", source)
        nonempty_str(key, f"{path}.{key!r}", source)
        if isinstance(item, float):
            item = finite(item, f"{path}.{key}", source)
        elif not isinstance(item, str | int | bool):
            raise field_error(
                f"{path}.{key}",
                f"attribute values must be str, int, float or bool, got {type(item).__name__}",
                source,
            )
        out[key] = item
    return FrozenMap(out)


def decode_names(
    value: Any, path: str, source: str | None, *, what: str = "capability"
) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise field_error(path, f"expected a list of strings, got {type(value).__name__}", source)
    seen: set[str] = set()
    out: list[str] = []
    for i, item in enumerate(value):
        name = nonempty_str(item, f"{path}[{i}]", source)
        if name in seen:
            raise field_error(f"{path}[{i}]", f"duplicate {what} {name!r}", source)
        seen.add(name)
        out.append(name)
    return tuple(out)


def triple(value: Any, path: str, source: str | None) -> tuple[float, float, float]:
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise field_error(path, "expected a list of 3 numbers", source)
    x, y, z = (finite(v, f"{path}[{i}]", source) for i, v in enumerate(value))
    return (x, y, z)
