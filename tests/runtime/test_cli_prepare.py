"""``prepare`` on the command line: refusals before anything is recorded, and the per-role
summary it prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.cli import main
from runtime.collect_support.demo_run import gantry_demo_task_text as demo_task_text
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
