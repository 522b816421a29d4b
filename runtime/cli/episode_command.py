"""``assetcast episode RUN BATCH EPISODE --frames DIR``: what the cameras saw, for a person.

Writes ``DIR/bNNNN_eNNNN.contact_sheet.png`` (every camera and modality, frames evenly
spaced) and copies the episode's camera files (videos, depth, segmentation, metadata) into
``DIR``. Every file is checked against its commit receipt before it is used.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from runtime.cli.exit_codes import EXIT_OK, UsageError
from runtime.cli.output import out
from runtime.cli.store_access import open_for_reading, read_run


def cmd_episode(args: argparse.Namespace) -> int:
    from runtime.files import write_bytes_atomic
    from runtime.sim.cameras.contact_sheet import contact_sheet, png_bytes
    from runtime.sim.cameras.reader import read_episode_frames
    from runtime.sim.cameras.storage import episode_stem

    events = read_run(open_for_reading(args), args.run_id)  # read-only: never migrates
    created = next((e.payload for e in events if e.type == "RunCreated"), None)
    receipts = [
        e.payload
        for e in events
        if e.type == "TrajectoryCommitted"
        and (e.payload["batch_index"], e.payload["episode_index"]) == (args.batch, args.episode)
    ]
    where = f"run {args.run_id}: batch {args.batch} episode {args.episode}"
    if not receipts or created is None:
        raise UsageError(f"{where} has no committed trajectory")
    receipt = receipts[-1]  # a re-run after a crash supersedes
    if not receipt.get("files"):
        raise UsageError(f"{where} has no camera files (the task records no cameras)")
    output_dir = Path(created["output_dir"])
    frames = read_episode_frames(output_dir, receipt)
    target = Path(args.frames)
    if target.exists() and not target.is_dir():
        raise UsageError(f"--frames {target}: exists and is not a folder")
    target.mkdir(parents=True, exist_ok=True)
    sheet = target / f"{episode_stem(args.batch, args.episode)}.contact_sheet.png"
    write_bytes_atomic(sheet, png_bytes(contact_sheet(frames)))
    for entry in receipt["files"]:
        source = output_dir / str(entry["path"])
        shutil.copyfile(source, target / source.name)
    out(f"contact sheet: {sheet}")
    for name, camera in frames.cameras.items():
        modalities = ", ".join(camera.frames)
        out(f"  {name}: {camera.metadata['frame_count']} frames at {camera.metadata['fps']} fps"
            f" ({modalities})")
    out(f"{len(receipt['files'])} camera file(s) copied to {target}")
    return EXIT_OK
