"""The metadata files' JSON text is ``json.dumps(indent=4)`` byte for byte, however it is
produced (a changed character is a changed file and a changed dataset digest)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from runtime.export.json_text import json_bytes


def _reference(value: Any) -> bytes:
    return (json.dumps(value, indent=4, ensure_ascii=False, allow_nan=False) + "\n").encode()


VALUES = [
    {"observation.state": {"min": [-1.5, 0.0, -0.0, 1e-300, 1e300, 3.0000000000000004],
                           "count": [4732]}},
    {"features": {"a": {"dtype": "float32", "shape": [7], "names": ["j1", "j,  2", "ü"],
                        "units": None}}, "splits": {"train": "0:16"}, "fps": 50},
    {"empty": {}, "none": [], "flags": [True, False, None], "mixed": [1, "a, b", 2.5]},
    {"nested": [[1, 2], [[3.5]], [], {}], "tuple": (1, 2.0), "text": "tab\t\"quote\" ✓"},
    {"numpy": [np.float64(0.1), 2], "big": [2**70, -(2**70)]},
    [1, 2, 3],
    "plain",
    7,
    {1: "int key"},
]


@pytest.mark.parametrize("value", VALUES)
def test_json_bytes_is_the_standard_indented_text(value: Any) -> None:
    assert json_bytes(value) == _reference(value)


def test_nan_is_refused_as_by_the_standard_encoder() -> None:
    with pytest.raises(ValueError):
        json_bytes({"stats": [1.0, math.nan]})
    with pytest.raises(ValueError):
        json_bytes({"stats": {"mean": math.inf}})


def test_random_stats_text() -> None:
    rng = np.random.default_rng(5)
    for _ in range(20):
        value = {f"k{n}": {s: (rng.standard_normal(int(rng.integers(1, 9)))
                               * 10.0 ** int(rng.integers(-30, 30))).tolist()
                           for s in ("min", "max", "mean")} for n in range(3)}
        assert json_bytes(value) == _reference(value)
