"""``--plugin MODULE``: import the user's modules that register checks and skills.

A task may name checks and skills that live in the user's own code. The command line has
no other way to learn about them, and a resumed run must judge with the same functions as
the session it continues, so every run command can import them first.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable

from domain.errors import AssetcastInputError

PLUGINS_ENV = "ASSETCAST_PLUGINS"


class PluginImportError(AssetcastInputError):
    """A plugin module named on the command line or in ASSETCAST_PLUGINS did not import."""


def plugin_names(from_flags: Iterable[str] | None) -> list[str]:
    """Modules from ``$ASSETCAST_PLUGINS`` (comma-separated) and then ``--plugin`` flags."""
    names = [n.strip() for n in os.environ.get(PLUGINS_ENV, "").split(",") if n.strip()]
    names += [n for n in (from_flags or ()) if n not in names]
    return names


def load_plugins(names: Iterable[str]) -> None:
    """Import each module; the working directory is searchable, as with ``python -m``."""
    names = list(names)
    if names and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as error:  # any failure while importing user code is bad input
            raise PluginImportError(
                f"--plugin {name}: cannot import: {type(error).__name__}: {error}"
            ) from error
