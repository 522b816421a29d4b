"""`assetcast audit` prints each asset's episode results: accepted/attempted and every
episode rejection reason with its count."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.cli import main
from store import EventStore, NewEvent
from tests.cli_logging import reset_cli_logging  # noqa: F401
from tests.store.test_audit import (
    LogBuilder,
    _batch_start,
    _collection_start,
    _created,
    _prepared,
)


def _log() -> list:
    b = LogBuilder("run-audit")
    _created(b)
    _prepared(b)
    _collection_start(b, "s" * 12)
    _batch_start(b, 0)
    ids = {"batch_index": 0}
    failed = {"name": "inside_region", "status": "failed", "detail": "", "metrics": {}}
    for e in range(3):
        b.add("EpisodeStarted", **ids, episode_index=e, seed=e)
        b.add("InitialChecked", **ids, episode_index=e, passed=True, checks=[])
        b.add("EpisodeExecuted", **ids, episode_index=e, completed=True, steps=1, skills=[],
              detail="")
        accepted = e == 2
        reason = "accepted" if accepted else "final_checks_failed"
        b.add("EpisodeJudged", **ids, episode_index=e, accepted=accepted,
              checks=[] if accepted else [failed], reason=reason)
        if accepted:
            b.add("TrajectoryCommitted", **ids, episode_index=e, path="r/b0_e2.pt", bytes=1,
                  sha256="0" * 64)
        else:
            b.add("TrajectoryDiscarded", **ids, episode_index=e, reason=reason)
        b.add("ResetSubmitted", **ids, episode_index=e)
    return b.events


def test_audit_table_lists_episode_rejection_reasons_with_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    with EventStore(url) as store:
        version = 0
        for event in _log():
            version = store.append(
                "run-audit", [NewEvent(event.type, dict(event.payload))], expected_version=version
            )
    capsys.readouterr()
    assert main(["audit", "--db", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "episode rejections" in lines[0] and "preparation rejections" in lines[0]
    alpha = next(line for line in lines if line.startswith("alpha"))
    assert " 1/3 " in alpha
    assert "final_checks_failed: inside_region failed x2" in alpha
