"""Episode frames for the run report: a small RGB contact sheet per committed episode.

Registered with ``runtime.report.frames`` (the report loads this module by name), so the
report shows what the cameras recorded without the report knowing about cameras. Each
sheet is read back from the committed video files, each checked against its receipt
(``read_episode_frames``): what the page shows is what was committed, and a file that is
missing or altered shows the reason instead. The page stays bounded: at most
``MAX_EPISODES`` episodes, evenly spaced over the committed ones, ``COLUMNS`` frames per
camera, RGB only (depth and segmentation are in ``assetcast episode ... --frames``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from runtime.report.frames import register_frame_source
from runtime.sim.cameras.contact_sheet import contact_sheet, png_bytes
from runtime.sim.cameras.reader import CameraFileInvalid, read_episode_frames

MAX_EPISODES = 12
COLUMNS = 4


def committed_with_cameras(events: Sequence[Any]) -> dict[tuple[int, int], dict[str, Any]]:
    """``{(batch, episode): TrajectoryCommitted payload}`` of episodes with camera files."""
    committed = {}
    for event in events:
        if event.type == "TrajectoryCommitted" and event.payload.get("files"):
            payload = event.payload
            committed[(int(payload["batch_index"]), int(payload["episode_index"]))] = payload
    return committed


def sample(keys: Sequence[tuple[int, int]], limit: int = MAX_EPISODES) -> list[tuple[int, int]]:
    """At most ``limit`` keys, evenly spaced, first and last included."""
    ordered = sorted(keys)
    if len(ordered) <= limit:
        return ordered
    picks = np.unique(np.linspace(0, len(ordered) - 1, limit).round().astype(int))
    return [ordered[i] for i in picks]


def episode_sheets(
    events: Sequence[Any], output_dir: Path | None
) -> dict[tuple[int, int], bytes | str]:
    """The frame source: PNG bytes per sampled episode, or why there is none."""
    committed = committed_with_cameras(events)
    if not committed or output_dir is None:
        return {}
    sheets: dict[tuple[int, int], bytes | str] = {}
    for key in sample(list(committed)):
        try:
            frames = read_episode_frames(output_dir, committed[key], modalities=("rgb",))
        except CameraFileInvalid as error:
            sheets[key] = str(error)
            continue
        if not any(camera.frames for camera in frames.cameras.values()):
            sheets[key] = "this episode recorded no RGB camera"
            continue
        sheets[key] = png_bytes(contact_sheet(frames, columns=COLUMNS))
    return sheets


register_frame_source(episode_sheets)
