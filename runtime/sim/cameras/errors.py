"""Errors of the camera rig: all bad input or environment (exit 2, nothing recorded)."""

from __future__ import annotations

from domain.errors import AssetcastInputError


class RenderBackendUnavailable(AssetcastInputError):
    """No offscreen OpenGL backend works here; the message names the missing library."""

