"""`report_text` writes exactly what `json.dumps(sort_keys=True, indent=2, allow_nan=False)`
writes, for any JSON value, and fails the same way on values JSON cannot carry."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.files import report_text
from runtime.json_text import indented_json


def _stdlib(value: Any) -> str:
    return json.dumps(value, sort_keys=True, indent=2, allow_nan=False)


_leaves = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_same_bytes_as_the_standard_library(value: Any) -> None:
    assert indented_json(value) == _stdlib(value)
    assert report_text(value) == _stdlib(value) + "\n"


@pytest.mark.parametrize("value", [
    {1: "int key", 2: "sorted as ints"}, {"a": OrderedDict(b=1)}, [True, 1, 1.0, -0.0, 1e-7],
    {"deep": [[[[{"x": "\u00e9\u2028\"\\\n"}]]]]}, [[], {}, ""],
])
def test_awkward_values_match(value: Any) -> None:
    assert indented_json(value) == _stdlib(value)


@pytest.mark.parametrize("value", [float("nan"), {"a": [float("inf")]}, -float("inf")])
def test_out_of_range_floats_raise_as_json_does(value: Any) -> None:
    with pytest.raises(ValueError, match="^Out of range float values are not JSON compliant"):
        indented_json(value)


def test_a_value_json_cannot_encode_raises_as_json_does() -> None:
    with pytest.raises(TypeError, match="^Object of type set is not JSON serializable$"):
        indented_json({"a": {1, 2}})
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="^Circular reference detected$"):
        indented_json(cycle)
