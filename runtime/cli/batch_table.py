"""The per-batch table (asset set, accepted, why rejected, where the files are) that both
``demo`` and ``show`` print, built from the run's events alone."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runtime.cli.output import table
from store.projections.run_digest import RunDigest


def _relative(path: str, base: str | None) -> str:
    """``path`` relative to the run output folder when it lies inside it."""
    if base is None:
        return path
    try:
        return str(Path(path).relative_to(base))
    except ValueError:
        return path


def digest_rows(digest: RunDigest) -> list[list[Any]]:
    """Per batch: asset set (role=asset_id), accepted/attempted, why episodes were rejected,
    and where its trajectories and deployment are (relative to the run's output folder)."""
    output_dir = digest.created.get("output_dir")
    rows = []
    for batch in digest.batch_rows():
        assets = batch["assets"]
        rows.append(
            [
                batch["batch_index"],
                " ".join(f"{role}={assets[role]}" for role in sorted(assets)),
                f"{batch['accepted']}/{batch['attempted']}",
                ", ".join(f"{r} x{n}" for r, n in batch["reasons"].items()) or "-",
                ", ".join(_relative(f, output_dir) for f in batch["folders"]) or "-",
                _relative(batch["deployment"] or "-", output_dir),
            ]
        )
    return rows


def batch_rows(events: Iterable[Any]) -> list[list[Any]]:
    """:func:`digest_rows` of a log given as events."""
    digest = RunDigest()
    for event in events:
        digest.apply(event)
    return digest_rows(digest)


def digest_table(digest: RunDigest) -> str:
    headers = ["batch", "asset set", "accepted", "rejected because", "trajectories", "deployment"]
    return table(headers, digest_rows(digest))


def batch_table(events: Iterable[Any]) -> str:
    digest = RunDigest()
    for event in events:
        digest.apply(event)
    return digest_table(digest)
