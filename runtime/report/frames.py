"""Hook for episode frames in the report (the cameras package registers a source here).

A frame source maps the run's events and output folder to, per episode, PNG bytes (a frame
or a contact sheet) or the reason there is none; the report shows whatever the registered
sources return, and says that no camera frames are recorded when there are none. Sources
live with what records the frames: ``DEFAULT_SOURCES`` names the modules that register
one when imported, loaded on first use (so the report does not import them up front and
depends on nothing it does not know by name).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

FrameSource = Callable[[Sequence[Any], Path | None], Mapping[tuple[int, int], bytes | str]]
DEFAULT_SOURCES = ("runtime.sim.cameras.report_frames",)
_SOURCES: list[FrameSource] = []
_loaded = False


def register_frame_source(source: FrameSource) -> None:
    """Add a source of ``{(batch_index, episode_index): PNG bytes or a reason}``."""
    if source not in _SOURCES:
        _SOURCES.append(source)


def _load_default_sources() -> None:
    global _loaded
    if not _loaded:
        for module in DEFAULT_SOURCES:
            importlib.import_module(module)
        _loaded = True


def episode_frames(
    events: Sequence[Any], output_dir: Path | None
) -> dict[tuple[int, int], bytes | str]:
    _load_default_sources()
    frames: dict[tuple[int, int], bytes | str] = {}
    for source in _SOURCES:
        frames.update(source(events, output_dir))
    return frames
