"""Hook for episode frames in the report (the cameras work registers a source here).

A frame source maps the run's events and output folder to PNG bytes of one frame per
accepted episode; the report shows whatever the registered sources return, and says that
no camera frames are recorded when there are none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

FrameSource = Callable[[Sequence[Any], Path | None], Mapping[tuple[int, int], bytes]]
_SOURCES: list[FrameSource] = []


def register_frame_source(source: FrameSource) -> None:
    """Add a source of ``{(batch_index, episode_index): PNG bytes}``."""
    _SOURCES.append(source)


def episode_frames(events: Sequence[Any], output_dir: Path | None) -> dict[tuple[int, int], bytes]:
    frames: dict[tuple[int, int], bytes] = {}
    for source in _SOURCES:
        frames.update(source(events, output_dir))
    return frames
