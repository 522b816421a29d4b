"""Package names loaded on first use (PEP 562).

A command that needs one light module of a package (a reach check, the recordings of a run)
must not import MuJoCo, torch or the driver with the package's ``__init__``: each package
lists where its public names live and takes its module ``__getattr__`` from here.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``exports[name]`` (a module path) is imported when
    ``name`` is first looked up, and the value is kept in the package (one import per name)."""

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
