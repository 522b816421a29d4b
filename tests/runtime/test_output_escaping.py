"""Names cannot forge output: control characters are refused where names enter (ids in task
files, descriptors, catalog folder names) and escaped wherever the CLI prints what a
database or a folder holds (runs, show, events, audit, forensics, error lines)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from domain.assets import AssetDescriptor
from domain.errors import AssetValidationError, ConfigError
from runtime.assets.providers import DirectoryAssetProvider
from runtime.cli import main
from runtime.cli.output import escape, table
from runtime.taskfile import load_task
from store import NewEvent
from store.event_store import EventStore
from tests.cli_logging import reset_cli_logging  # noqa: F401 (autouse)
from tests.runtime.hostile_support import descriptor, write_package
from tests.store.eventgen import created, preparation

FORGED = "place\n run-x  completed  1/1  9/9\x1b[31m"
RED = "\x1b[31mred\x1b[0m"


@pytest.mark.parametrize(("asset_id", "shown"), [("bin\nforged", "'\\n'"), (RED, "'\\x1b'"),
                                                   ("a\x7fb", "'\\x7f'"), ("a\x9bb", "'\\x9b'"),
                                                   ("a\u202eb", "'\\u202e'")])
def test_asset_id_with_control_characters_is_refused(asset_id: str, shown: str) -> None:
    with pytest.raises(
        AssetValidationError,
        match=r"^descriptor\.asset_id: must not contain control characters "
        rf"\(found {re.escape(shown)}\)$",
    ):
        AssetDescriptor.from_dict(descriptor(asset_id=asset_id))


def test_task_ids_and_names_with_control_characters_are_refused(tmp_path: Path) -> None:
    from runtime.demo import demo_task_text

    path = tmp_path / "task.yaml"
    path.write_text(demo_task_text().replace("task_id: place_item_in_bin", 'task_id: "a\\e[31m"'))
    with pytest.raises(
        ConfigError,
        match=rf"^{path}: task_id: must not contain control characters \(found '\\x1b'\)$",
    ):
        load_task(path)
    path.write_text(demo_task_text().replace("entity_id: bin", 'entity_id: "bin\\nx"', 1))
    with pytest.raises(ConfigError, match=r"entity_id: must not contain control characters"):
        load_task(path)


def test_catalog_folder_name_with_escape_is_refused(tmp_path: Path) -> None:
    write_package(tmp_path / "cat" / f"evil{RED}")
    with pytest.raises(
        AssetValidationError, match=r"folder name contains a control character \('\\x1b'\)$"
    ):
        DirectoryAssetProvider(tmp_path / "cat").candidates(None, 4)


def test_escape_makes_every_control_character_visible() -> None:
    assert escape("ok name/ü") == "ok name/ü"
    assert escape("a\nb\x1b[31mc\x7f\x9b\u2028\u202e") == "a\\nb\\x1b[31mc\\x7f\\x9b\\u2028\\u202e"
    rendered = table(["id"], [["x\ny"]])
    assert rendered.count("\n") == 3 and "x\\ny" in rendered


def _hostile_run(tmp_path: Path) -> tuple[str, str]:
    """A run whose names were written into the database directly, as a forged or older
    database would hold them (the store does not judge names)."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    store = EventStore(url)
    run_id = "run-20260101-000000-abcdef"
    first = created(run_id)
    first.payload.update(task_id=FORGED, output_dir=f"/out/{RED}")
    events = [first, *preparation(1)]
    events[2].payload["assets"] = {"item": {"asset_id": RED, "content_sha256": "c" * 64}}
    events.append(NewEvent("RunFailed", {
        "phase": "preparing", "error_type": "X", "detail": f"bad\n{RED}",
        "traceback": f"Traceback\n  line {RED}\n", "batch_index": None, "episode_index": None,
    }))
    store.append(run_id, events, expected_version=0)
    return url, run_id


@pytest.mark.parametrize("command", ["runs", "show", "events", "forensics", "audit"])
def test_human_output_of_names_from_the_database_is_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    url, run_id = _hostile_run(tmp_path)
    args = ["--db", url, command] + ([run_id] if command in ("show", "events", "forensics") else [])
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\x9b" not in printed
    assert "\\x1b[31m" in printed or "\\u001b[31m" in printed  # visible, either way
    if command == "runs":
        lines = printed.splitlines()
        assert len(lines) == 3  # header, rule, the one run: the newline forged no row
        assert "place\\n run-x  completed" in lines[2]


def test_events_json_stays_valid_json_without_raw_controls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    url, run_id = _hostile_run(tmp_path)
    assert main(["--db", url, "events", run_id, "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert json.loads(lines[0])["payload"]["task_id"] == FORGED
    assert all(line.isascii() and line.isprintable() for line in lines)
