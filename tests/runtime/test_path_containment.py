"""Every path a task file names stays inside the task's folder, and a non-role entity's
package is a real, verified package copied as that package and nothing else. A refusal is
one line, exit 2, with nothing recorded and nothing copied; a failure found after the run
was created is that run's recorded failure, exit 1 — never both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.cli import main
from store.event_store import EventStore
from tests.cli_logging import reset_cli_logging  # noqa: F401 (autouse)
from tests.runtime.hostile_support import (
    binary_stl,
    descriptor,
    small_catalog,
    task_file,
    write_package,
)

SHELF = "    - entity_id: shelf\n      position_m: [0.3, 0.3]\n      asset: {{package: {}}}\n"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_catalog(tmp_path_factory.mktemp("containment"))


def _prepare(task: Path, catalog: Path, base: Path, *more: str) -> int:
    return main(
        ["prepare", str(task), "--catalog", f"item={catalog}", "--catalog", f"bin={catalog}",
         "--out", str(base / "out"), "--db", f"sqlite:///{base / 'a.db'}", "--log-level",
         "warning", *more]
    )


def _runs(base: Path) -> list[str]:
    if not (base / "a.db").exists():
        return []
    return [r.run_id for r in EventStore(f"sqlite:///{base / 'a.db'}").list_runs()]


def _refused(task: Path, catalog: Path, base: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert _prepare(task, catalog, base) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("assetcast: error: ")
    assert _runs(base) == [] and not (base / "out").exists()
    return err.removeprefix("assetcast: error: ").rstrip("\n")


def _secret(base: Path) -> Path:
    """A valid package outside the task's folder, beside a file nobody may copy."""
    secret = write_package(base / "secretdir")
    (base / "secretdir" / "notes.json").write_text('{"password": "hunter2"}')
    return secret


@pytest.mark.parametrize(
    ("package", "message"),
    [
        ("../secretdir/asset.catalog.json",
         "path '../secretdir/asset.catalog.json' escapes the task file's folder"),
        ("props/../../secretdir/asset.catalog.json",
         "path 'props/../../secretdir/asset.catalog.json' escapes the task file's folder"),
        ("{base}/secretdir/asset.catalog.json", "must be a path relative to the task file"),
        ("~/asset.catalog.json", "must be a path relative to the task file"),
        ("props/notes.json", "must name a package's asset.catalog.json"),
    ],
)
def test_entity_package_paths_outside_the_task_folder_are_refused(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], package: str,
    message: str,
) -> None:
    _secret(tmp_path)
    (tmp_path / "task").mkdir()
    task = task_file(tmp_path / "task", SHELF.format(package.format(base=tmp_path)))
    assert _refused(task, catalog, tmp_path, capsys) == (
        f"{task}: scene.entities[2].asset.package: {message}"
    )


def test_symlink_out_of_the_task_folder_is_refused(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _secret(tmp_path)
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "props").symlink_to(tmp_path / "secretdir")
    task = task_file(tmp_path / "task", SHELF.format("props/asset.catalog.json"))
    assert _refused(task, catalog, tmp_path, capsys) == (
        f"{task}: package of entity 'shelf': {tmp_path / 'task' / 'props'} is a symbolic link"
        " (not allowed)"
    )


def test_entity_package_must_be_a_real_package(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shelf = write_package(tmp_path / "task" / "props" / "shelf")
    (shelf / "asset.catalog.json").write_text(json.dumps({"visual_path": "mesh.obj"}))
    task = task_file(tmp_path / "task", SHELF.format("props/shelf/asset.catalog.json"))
    assert _refused(task, catalog, tmp_path, capsys) == (
        f"entity 'shelf': {shelf / 'asset.catalog.json'}: descriptor: required field is missing"
    )
    write_package(shelf)
    (shelf / "extra.obj").symlink_to(tmp_path / "task" / "task.yaml")
    assert _refused(task, catalog, tmp_path, capsys) == (
        f"entity 'shelf': {shelf / 'extra.obj'}: symlinks are not allowed in a package"
    )


def test_entity_mesh_over_the_limit_is_refused_before_the_run(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import trimesh

    box = trimesh.creation.box(extents=[0.04, 0.04, 0.04])
    box.apply_translation([0, 0, 0.02])
    shelf = write_package(
        tmp_path / "task" / "shelf", mesh=binary_stl(box.triangles, claimed=3_000_000),
        visual="mesh.stl", manifest={"descriptor": descriptor(), "visual_path": "mesh.stl"},
    )
    task = task_file(tmp_path / "task", SHELF.format("shelf/asset.catalog.json"))
    assert _refused(task, catalog, tmp_path, capsys) == (
        f"entity 'shelf': mesh_too_large: {shelf / 'mesh.stl'} has 3000000 faces, limit 500000"
        " (max_mesh_faces)"
    )


def test_entity_package_is_copied_as_its_snapshot_and_nothing_else(
    catalog: Path, tmp_path: Path
) -> None:
    _secret(tmp_path)
    shelf = write_package(tmp_path / "task" / "props" / "shelf")
    (tmp_path / "task" / "props" / "secret.txt").write_text("not part of the package")
    task = task_file(tmp_path / "task", SHELF.format("props/shelf/asset.catalog.json"))
    assert _prepare(task, catalog, tmp_path) == 0
    deployment = tmp_path / "out" / "batch_0000"
    manifest = json.loads((deployment / "manifest.json").read_text())
    entity_files = sorted(f for f in manifest["files"] if f.startswith("entities/"))
    assert entity_files == [
        "entities/shelf/.assetcast/collision/piece_000.obj",
        "entities/shelf/.assetcast/snapshot.json",
        "entities/shelf/asset.catalog.json",
        "entities/shelf/mesh.obj",
    ]
    on_disk = sorted(
        p.relative_to(deployment).as_posix() for p in deployment.rglob("*") if p.is_file()
    )
    roles = sorted(f for f in manifest["files"] if f.startswith("assets/"))
    assert on_disk == sorted([*entity_files, *roles, "manifest.json", "task.yaml"])
    copied = (deployment / "entities/shelf/mesh.obj").read_bytes()
    assert copied == (shelf / "mesh.obj").read_bytes()
    assert "shelf" in (deployment / "task.yaml").read_text()
    assert not list((tmp_path / "out").glob("**/secret*")) and not list(
        (tmp_path / "out").glob("**/notes.json")
    )


def test_entity_mesh_failing_after_the_run_began_is_a_recorded_failure_exit_1(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_package(tmp_path / "task" / "shelf", mesh=b"v 0 0 0\nf 1 2 3\n")  # loads as nothing
    task = task_file(tmp_path / "task", SHELF.format("shelf/asset.catalog.json"))
    assert _prepare(task, catalog, tmp_path) == 1
    err = capsys.readouterr().err
    [run_id] = _runs(tmp_path)
    assert f"assetcast: run {run_id} failed: AssetValidationError: " in err
    events = EventStore(f"sqlite:///{tmp_path / 'a.db'}").read(run_id)
    assert events[-1].type == "RunFailed"
    assert events[-1].payload["error_type"] == "AssetValidationError"


def test_deployment_edited_before_collect_exits_2_unrecorded_or_1_recorded(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unreadable deployment task is found before anything is appended (exit 2, the log
    unchanged); a changed mesh is found after ``CollectionStarted`` (exit 1, ``RunFailed``)."""
    task = task_file(tmp_path)
    assert _prepare(task, catalog, tmp_path) == 0
    [run_id] = _runs(tmp_path)
    store = EventStore(f"sqlite:///{tmp_path / 'a.db'}")
    before = len(store.read(run_id))
    deployment = tmp_path / "out" / "batch_0000"
    original = (deployment / "task.yaml").read_bytes()
    collect = ["collect", run_id, "--db", f"sqlite:///{tmp_path / 'a.db'}", "--no-progress",
               "--log-level", "warning"]
    (deployment / "task.yaml").write_text("edited\n")
    capsys.readouterr()
    assert main(collect) == 2
    assert capsys.readouterr().err == (
        f"assetcast: error: {deployment / 'task.yaml'}: expected a mapping, got str\n"
    )
    assert len(store.read(run_id)) == before
    (deployment / "task.yaml").write_bytes(original)
    mesh = next(p for p in (deployment / "assets").glob("*/mesh.*"))
    mesh.write_bytes(mesh.read_bytes() + b"\n")
    assert main(collect) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("assetcast")]
    assert lines[0].startswith(f"assetcast: run {run_id} failed: DeploymentInvalid: {mesh}: SHA")
    events = store.read(run_id)
    assert events[-1].type == "RunFailed"
    assert events[-1].payload["phase"] == "validate_deployment"


def test_resume_refuses_bad_input_before_recording_run_resumed(tmp_path: Path) -> None:
    """A collection failed mid-run, resumed with a check this process does not know: the
    refusal comes before ``RunResumed``, so the log is exactly what it was (exit 2 holds)."""
    from domain.task import CheckSpec
    from runtime.collection import CollectionRefused, collect
    from runtime.resume import resume
    from store import InMemoryEventStore
    from tests.runtime.demo_runs import prepared

    store = InMemoryEventStore()
    catalog = small_catalog(tmp_path)
    run_id = prepared(store, tmp_path / "out", catalog, batches=1, episodes_per_batch=1)

    def broken(deployment_dir: Path, *, seed: int, settle_steps: int) -> None:
        raise RuntimeError("simulator unavailable")

    with pytest.raises(RuntimeError):
        collect(run_id, store=store, environment_factory=broken, progress=False)
    before = [e.type for e in store.read(run_id)]
    assert before[-1] == "RunFailed"
    with pytest.raises(CollectionRefused, match="no_such_check"):
        resume(run_id, store=store, initial_checks=[CheckSpec("no_such_check")], progress=False)
    assert [e.type for e in store.read(run_id)] == before
