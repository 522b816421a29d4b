"""The per-batch table (asset set, accepted, why rejected, where the files are) that both
``demo`` and ``show`` print, built from the run's events alone."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runtime.cli.output import table
from store.projections.audit import episode_outcomes


def _relative(path: str, base: str | None) -> str:
    """``path`` relative to the run output folder when it lies inside it."""
    if base is None:
        return path
    try:
        return str(Path(path).relative_to(base))
    except ValueError:
        return path


def batch_rows(events: Sequence[Any]) -> list[list[Any]]:
    """Per batch: asset set (role=asset_id), accepted/attempted, why episodes were rejected,
    and where its trajectories and deployment are (relative to the run's output folder)."""
    output_dir = next((e.payload["output_dir"] for e in events if e.type == "RunCreated"), None)
    resolved: dict[int, dict[str, Any]] = {}
    deployments: dict[int, str] = {}
    for event in events:
        if event.type == "BatchResolved":
            resolved[int(event.payload["batch_index"])] = event.payload
        elif event.type == "DeploymentMaterialized":
            deployments[int(event.payload["batch_index"])] = event.payload["deployment_path"]
    outcomes = episode_outcomes(events)
    rows = []
    for index in sorted(resolved):
        mine = [o for k, o in sorted(outcomes.items()) if k[0] == index]
        folders = sorted({str(Path(o["path"]).parent) for o in mine if o["committed"]})
        reasons: dict[str, int] = {}
        for o in mine:
            if not o["accepted"]:
                why = f"{o['judgement']} ({o['cause']})" if o.get("cause") else o["judgement"]
                reasons[why] = reasons.get(why, 0) + 1
        assets = resolved[index]["assets"]
        rows.append(
            [
                index,
                " ".join(f"{role}={assets[role]['asset_id']}" for role in sorted(assets)),
                f"{sum(o['accepted'] for o in mine)}/{len(mine)}",
                ", ".join(f"{r} x{n}" for r, n in sorted(reasons.items())) or "-",
                ", ".join(_relative(f, output_dir) for f in folders) or "-",
                _relative(deployments.get(index, "-"), output_dir),
            ]
        )
    return rows


def batch_table(events: Sequence[Any]) -> str:
    headers = ["batch", "asset set", "accepted", "rejected because", "trajectories", "deployment"]
    return table(headers, batch_rows(events))
