"""Errors the simulator raises for bad input (CLI exit 2)."""

from __future__ import annotations

from domain.errors import AssetcastInputError


class SceneBuildError(AssetcastInputError):
    """A deployment's scene cannot be turned into a MuJoCo model (missing or bad asset file)."""


class SceneMismatch(AssetcastInputError):
    """A replacement deployment changes more than the role bodies (table, robot, other entities)."""
