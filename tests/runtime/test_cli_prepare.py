"""``prepare`` on the command line: refusals before anything is recorded, and the per-role
summary it prints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.collection.demo_run import gantry_demo_task_text as demo_task_text
from tests.cli_logging import reset_cli_logging  # noqa: F401 (autouse)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("catalog")
    assert main(["catalog", "demo", str(directory)]) == 0
    return directory


def _prepare_argv(task: Path, catalog: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "prepare", str(task), "--catalog", f"item={catalog}", "--catalog", f"bin={catalog}",
        "--out", str(tmp_path / "out"), "--db", f"sqlite:///{tmp_path / 'a.db'}",
        "--log-level", "warning", *extra,
    ]


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        (
            "{skill: pick, object: item}", "{skill: pik, object: item}",
            "skill 'pik' (did you mean 'pick'?)",
        ),
        ("    - {check: at_rest}\n", "    - {check: at_rets}\n", "check 'at_rets' (did you mean "
         "'at_rest'?)"),
        ("    - {check: at_rest}\n", "    - {check: zzz_unheard_of}\n", "check 'zzz_unheard_of'"),
    ],
)
def test_prepare_refuses_unregistered_names_and_suggests_close_ones(
    tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str],
    old: str, new: str, named: str,
) -> None:
    text = demo_task_text()
    assert old in text
    task = tmp_path / "task.yaml"
    task.write_text(text.replace(old, new, 1), encoding="utf-8")
    assert main(_prepare_argv(task, catalog, tmp_path)) == 2
    assert capsys.readouterr().err == (
        f"assetcast: error: {task}: the task uses {named}, not registered in this process; "
        "import the module that registers them (--plugin MODULE)\n"
    )
    assert not (tmp_path / "a.db").exists() and not (tmp_path / "out").exists()


def _broken_copies(catalog: Path, target: Path, count: int) -> None:
    """``count`` copies of a demo block whose descriptor has a negative mass."""
    for index in range(count):
        folder = target / f"heavy-{index}"
        shutil.copytree(catalog / "block-040", folder)
        manifest = json.loads((folder / "asset.catalog.json").read_text())
        manifest["descriptor"]["asset_id"] = f"heavy-{index}"
        manifest["descriptor"]["physics"] = {"mass_kg": -1}
        (folder / "asset.catalog.json").write_text(json.dumps(manifest))


def test_prepare_prints_per_role_counts_and_top_rejection_reasons(
    tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mixed = tmp_path / "mixed"
    shutil.copytree(catalog, mixed)
    _broken_copies(catalog, mixed, 3)
    task = tmp_path / "task.yaml"
    task.write_text(demo_task_text(), encoding="utf-8")
    argv = [
        "prepare", str(task), "--catalog", f"item={mixed}", "--catalog", f"bin={catalog}",
        "--out", str(tmp_path / "out"), "--db", f"sqlite:///{tmp_path / 'a.db'}",
        "--log-level", "warning", "--candidates-per-role", "40",
    ]
    capsys.readouterr()
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:4] == [
        "role bin: saw 27 candidate(s), prepared 27, rejected 0",
        "role item: saw 30 candidate(s), prepared 27, rejected 3",
        "  3 x descriptor.physics.mass_kg: must be positive, got -1",
    ]
    assert lines[4].startswith("  batch 0000  ")
    # Under a cap the summary says so; the broken packages rank last and are not drawn.
    assert main([*argv[:-2], "--candidates-per-role", "5", "--out", str(tmp_path / "o2")]) == 0
    assert capsys.readouterr().out.splitlines()[1:3] == [
        "role bin: saw 5 of 27 candidate(s) (limit 5), prepared 5, rejected 0",
        "role item: saw 5 of 30 candidate(s) (limit 5), prepared 5, rejected 0",
    ]


def test_a_failed_preparation_still_prints_the_summary(
    tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken"
    _broken_copies(catalog, broken, 2)
    task = tmp_path / "task.yaml"
    task.write_text(demo_task_text(), encoding="utf-8")
    capsys.readouterr()
    assert main([
        "prepare", str(task), "--catalog", f"item={broken}", "--catalog", f"bin={catalog}",
        "--out", str(tmp_path / "out"), "--db", f"sqlite:///{tmp_path / 'a.db'}",
        "--log-level", "warning",
    ]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "role bin: saw 27 candidate(s), prepared 27, rejected 0",
        "role item: saw 2 candidate(s), prepared 0, rejected 2",
        "  2 x descriptor.physics.mass_kg: must be positive, got -1",
    ]
    assert " failed: " in captured.err


def test_the_prepare_api_refuses_unregistered_names_too(tmp_path: Path, catalog: Path) -> None:
    from domain.config import CollectionConfig
    from domain.errors import AssetcastInputError
    from runtime.assets.providers import DirectoryAssetProvider
    from runtime.prepare import prepare
    from store import InMemoryEventStore

    task = tmp_path / "task.yaml"
    task.write_text(
        demo_task_text().replace("{skill: place,", "{skill: plase,", 1), encoding="utf-8"
    )
    store = InMemoryEventStore()
    provider = DirectoryAssetProvider(catalog)
    with pytest.raises(AssetcastInputError) as caught:
        prepare(task, {"item": provider, "bin": provider}, cfg=CollectionConfig(),
                output_dir=tmp_path / "out", store=store)
    assert str(caught.value) == (
        f"{task}: the task uses skill 'plase' (did you mean 'place'?), not registered in this "
        "process; import the module that registers them (--plugin MODULE)"
    )
    assert store.list_runs() == [] and not (tmp_path / "out").exists()


def test_repeated_catalog_for_a_role_merges_and_counts_a_duplicate_once(
    tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    shutil.copytree(catalog / "block-040", extra / "block-040")  # the same package again
    shutil.copytree(catalog / "block-050", extra / "wide")
    manifest = json.loads((extra / "wide" / "asset.catalog.json").read_text())
    manifest["descriptor"]["asset_id"] = "block-050-heavy"
    manifest["descriptor"]["physics"] = {"mass_kg": 0.4}
    (extra / "wide" / "asset.catalog.json").write_text(json.dumps(manifest))
    task = tmp_path / "task.yaml"
    task.write_text(demo_task_text(), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'a.db'}"
    capsys.readouterr()
    assert main([
        "prepare", str(task), "--catalog", f"item={catalog}", "--catalog", f"item={extra}",
        "--catalog", f"bin={catalog}", "--out", str(tmp_path / "out"), "--db", url,
        "--log-level", "warning",
    ]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == [
        "role bin: saw 27 candidate(s), prepared 27, rejected 0",
        "role item: saw 28 candidate(s) (1 duplicate(s) listed once), prepared 28, rejected 0",
    ]
    from store.event_store import EventStore

    store = EventStore(url)
    [run] = store.list_runs()
    events = store.read(run.run_id)
    assert events[0].payload["providers"]["item"] == {
        "kind": "directories", "roots": [str(catalog), str(extra)]
    }
    [listed] = [e.payload for e in events
                if e.type == "CandidatesListed" and e.payload["role"] == "item"]
    assert (listed["available"], listed["duplicates"]) == (28, 1)
    assert "extra/wide" in listed["candidate_ids"]
    assert "extra/block-040" not in listed["candidate_ids"]
    assert f"{catalog.name}/block-040" in listed["candidate_ids"]
