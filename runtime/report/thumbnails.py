"""Thumbnails of each role's asset, rendered by MuJoCo offscreen in a fresh process.

Why a subprocess: a process that forks after a GL context exists hangs, and the caller
(the CLI, a test runner, a collector) may fork or may already hold one. The worker is a
new interpreter (``python -m runtime.report.render_worker``) with ``MUJOCO_GL=egl`` unless
the caller chose a backend, so it never inherits a context. If rendering is unavailable
the reason is returned instead of an image and the report says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

RENDER_TIMEOUT_S = 180.0
THUMBNAIL_PX = (240, 180)


def render_thumbnails(
    snapshots: Mapping[str, str], out_dir: Path
) -> dict[str, Path | str]:
    """``{key: PNG path or the reason there is none}`` for ``{key: snapshot folder}``."""
    if not snapshots:
        return {}
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "width": THUMBNAIL_PX[0], "height": THUMBNAIL_PX[1],
        "items": {key: {"snapshot": folder, "png": str(out_dir / f"{key}.png")}
                  for key, folder in snapshots.items()},
    }
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    env.setdefault("PYOPENGL_PLATFORM", env["MUJOCO_GL"])
    repo = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "runtime.report.render_worker"],
            input=json.dumps(spec), capture_output=True, text=True, env=env,
            timeout=RENDER_TIMEOUT_S, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        reason = f"rendering unavailable: {type(error).__name__}: {error}"
        return dict.fromkeys(snapshots, reason)
    try:
        answers = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    except ValueError:
        answers = {}
    tail = " ".join(proc.stderr.strip().splitlines()[-1:]) or f"exit code {proc.returncode}"
    results: dict[str, Path | str] = {}
    for key in snapshots:
        answer = answers.get(key)
        png = Path(spec["items"][key]["png"])
        if answer == "ok" and png.is_file():
            results[key] = png
        else:
            results[key] = f"rendering unavailable: {answer or tail}"
    if proc.returncode != 0:
        log.warning("report.render_failed", returncode=proc.returncode, stderr=tail)
    return results
