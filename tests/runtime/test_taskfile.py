"""load_task / dump_task: size cap, alias bombs, syntax errors with lines, the shipped demo."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from domain.errors import ConfigError
from domain.task import parse_task
from runtime.taskfile import MAX_TASK_BYTES, dump_task, load_task

DEMO = Path(__file__).resolve().parents[2] / "runtime" / "demo" / "task.yaml"


def test_demo_task_parses_as_specified() -> None:
    spec = load_task(DEMO)
    req = spec.asset_requirements
    assert req is not None
    assert spec.role_entities() == {"bin": "bin", "item": "item"}
    assert req.roles["item"].query.category == "block"
    assert req.roles["item"].query.capabilities == ("antipodal_grasp",)
    assert req.roles["item"].max_extent_m == 0.12
    assert dict(req.roles["bin"].query.attributes) == {"open_top": True}
    assert req.roles["bin"].query.capabilities == ("container",)
    assert [r.to_dict() for r in req.relations] == [
        {"kind": "fits_inside", "object_role": "item", "target_role": "bin", "clearance_m": 0.005}
    ]
    assert req.canonical_category("cube") == "block"
    assert [c.check for c in spec.checks.initial] == [
        "at_rest",
        "upright",
        "on_table",
        "no_penetration",
    ]
    assert [(c.check, c.object, c.target) for c in spec.checks.final] == [
        ("inside_region", "item", "bin"),
        ("at_rest", None, None),
        ("on_table", "bin", None),
        ("target_upright", None, "bin"),
    ]
    assert spec.scene.robot.kind == "franka_panda"
    assert spec.scene.robot.max_opening_m == 0.08  # the Panda hand's real stroke
    assert spec.scene.robot.base_position_m == (-0.3, 0.0)  # middle of the -x table edge
    assert spec.entity("item").position_m == (0.0, -0.15)
    assert spec.entity("bin").position_m == (0.0, 0.15)


def test_dump_is_deterministic_and_reloads(tmp_path: Path) -> None:
    spec = load_task(DEMO)
    text = dump_task(spec)
    assert text == dump_task(load_task(DEMO))
    out = tmp_path / "task.yaml"
    out.write_text(text, encoding="utf-8")
    assert load_task(out) == spec
    assert text.startswith("task_id: place_item_in_bin\nscene:\n")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError, match=rf"^{path}: task file not found$"):
        load_task(path)


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=rf"^{tmp_path}: task file is a directory, not a regular file$"
    ):
        load_task(tmp_path)


def test_file_over_one_mib_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(DEMO.read_bytes() + b"#" * MAX_TASK_BYTES)
    with pytest.raises(ConfigError, match=rf"^{path}: task file is larger than 1048576 bytes$"):
        load_task(path)


def test_exactly_one_mib_is_accepted(tmp_path: Path) -> None:
    data = DEMO.read_bytes()
    path = tmp_path / "edge.yaml"
    path.write_bytes(data + b"\n" + b"#" * (MAX_TASK_BYTES - len(data) - 1))
    assert path.stat().st_size == MAX_TASK_BYTES
    assert load_task(path).task_id == "place_item_in_bin"


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(
        ConfigError,
        match=rf"^{path}: line 1, column 4: invalid YAML: YAML anchors and aliases are not allowed",
    ):
        load_task(path)


def test_single_alias_is_refused(tmp_path: Path) -> None:
    text = DEMO.read_text(encoding="utf-8").replace(
        "  robot: {kind: franka_panda}",
        "  robot: &r {kind: franka_panda}\n  extra: *r",
    )
    path = tmp_path / "alias.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"line 5, column 10: invalid YAML: YAML anchors"):
        load_task(path)


def test_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("task_id: x\nscene: {table: [1, 2\nprogram: []\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=rf"^{path}: line 3, column \d+: invalid YAML: "
    ) as caught:
        load_task(path)
    assert "\n" not in str(caught.value)


def test_duplicate_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("task_id: a\ntask_id: b\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=rf"^{path}: line 2, column 1: invalid YAML: duplicate key 'task_id'$"
    ):
        load_task(path)


def test_unsafe_tag_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tag.yaml"
    path.write_text("task_id: !!python/object:os.system x\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{path}: line 1, column 10: invalid YAML: "):
        load_task(path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes(b"task_id: caf\xe9\n")
    with pytest.raises(ConfigError, match=rf"^{path}: task file is not UTF-8 \(byte 12\)$"):
        load_task(path)


def test_schema_errors_name_the_file(tmp_path: Path) -> None:
    raw = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    raw["scene"]["entities"][1]["yaw"] = 3
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{path}: scene\.entities\[1\]\.yaw: unknown key$"):
        load_task(path)
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{empty}: expected a mapping, got null$"):
        load_task(empty)


def test_parse_equals_load() -> None:
    assert load_task(DEMO) == parse_task(yaml.safe_load(DEMO.read_text(encoding="utf-8")))


def test_a_task_read_again_is_validated_once_per_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runtime.taskfile as taskfile

    parsed: list[str] = []
    real = taskfile.parse_task_bytes

    def counted(data: bytes, source: str) -> object:
        parsed.append(Path(source).name)
        return real(data, source)

    monkeypatch.setattr(taskfile, "parse_task_bytes", counted)
    monkeypatch.setattr(taskfile, "_PARSED", type(taskfile._PARSED)())
    text = DEMO.read_text()
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(text)
    second.write_text(text)  # a copy elsewhere (each batch's deployment has one)
    spec, digest = taskfile.load_task_with_digest(first)
    assert taskfile.load_task_with_digest(second) == (spec, digest)
    assert parsed == ["a.yaml"]
    first.write_text(text.replace("task_id: ", "task_id: changed_", 1))
    changed = load_task(first)  # new bytes: parsed again
    assert changed.task_id == "changed_" + spec.task_id and parsed == ["a.yaml", "a.yaml"]
    second.write_text(text.replace("scene:", "scene: [", 1))
    with pytest.raises(ConfigError, match="b.yaml"):  # failures are not kept, and name the file
        load_task(second)
    with pytest.raises(ConfigError, match="b.yaml"):
        load_task(second)
