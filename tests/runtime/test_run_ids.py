"""RUN arguments accept an exact id, ``latest`` or a unique prefix, in every command."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runtime.cli import main
from store.event_store import EventStore
from tests.cli_logging import reset_cli_logging  # noqa: F401 (autouse)
from tests.store.eventgen import created

FIRST, SECOND, NEWEST = "run-20260101-aaa001", "run-20260101-aaa002", "run-20260102-bbb001"


@pytest.fixture()
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'assetcast.db'}"
    store = EventStore(url)
    try:
        for run_id in (FIRST, SECOND, NEWEST):
            store.append(run_id, [created(run_id)], expected_version=0)
            time.sleep(0.01)  # distinct creation times: `latest` is the last created
    finally:
        store.close()
    return url


@pytest.mark.parametrize("given, expected", [
    ("run-20260102", NEWEST), ("latest", NEWEST), ("run-20260101-aaa002", SECOND),
])
def test_prefix_and_latest_name_one_run(
    url: str, given: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", given, "--db", url]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["run:", expected]
    assert main(["forensics", given, "--db", url]) == 0
    assert capsys.readouterr().out.startswith(f"run {expected}: ")


def test_ambiguous_prefix_lists_the_matches(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(url).removeprefix("sqlite:///") + ".out"
    for command in (
        ["show"], ["events"], ["verify"], ["resume"], ["report", "--out", out],
        ["export", "--format", "robomimic", "--out", f"{out}.hdf5", NEWEST],
    ):
        assert main([*command, "run-20260101", "--db", url]) == 2
        assert capsys.readouterr().err == (
            "assetcast: error: run prefix 'run-20260101' is ambiguous: 2 runs match "
            f"({FIRST}, {SECOND})\n"
        )


def test_unknown_prefix_and_latest_of_an_empty_store(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "run-2027", "--db", url]) == 2
    assert capsys.readouterr().err == (
        "assetcast: error: unknown run 'run-2027' (use `assetcast runs` to list runs)\n"
    )
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    EventStore(empty).close()
    assert main(["show", "latest", "--db", empty]) == 2
    assert capsys.readouterr().err == (
        "assetcast: error: no runs in the store, so no latest run\n"
    )
