"""Deployments: self-contained, atomically written, and any tampering is named."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from domain.canonical import sha256_hex
from domain.config import CollectionConfig
from domain.errors import AssetValidationError, DeploymentInvalid, SessionLost
from domain.matching import resolve_asset_set
from runtime.assets.demo_catalog import write_demo_catalog
from runtime.assets.providers import DirectoryAssetProvider
from runtime.assets.snapshot import read_snapshot
from runtime.deployment import (
    Deployment,
    materialize_deployment,
    remove_temp_dirs,
    validate_deployment,
)
from runtime.prepare import prepare
from runtime.taskfile import load_task
from store import InMemoryEventStore

DEMO_TASK = Path(__file__).resolve().parents[2] / "runtime" / "demo" / "task.yaml"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Deployment:
    root = tmp_path_factory.mktemp("deploy")
    write_demo_catalog(root / "catalog")
    provider = DirectoryAssetProvider(root / "catalog")
    result = prepare(
        DEMO_TASK, {"item": provider, "bin": provider}, cfg=CollectionConfig(),
        output_dir=root / "out", store=InMemoryEventStore(),
    )
    return result.deployments[0]


@pytest.fixture
def copy(prepared: Deployment, tmp_path: Path) -> Path:
    target = tmp_path / "batch_0000"
    shutil.copytree(prepared.path, target)
    return target


def a_mesh(deployment: Path) -> str:
    manifest = json.loads((deployment / "manifest.json").read_text())
    return next(rel for rel in sorted(manifest["files"]) if rel.endswith((".obj", ".stl")))


def test_deployment_is_self_contained_and_valid(prepared: Deployment, copy: Path) -> None:
    checked = validate_deployment(copy, expected_manifest_sha256=prepared.manifest_sha256)
    assert checked.asset_set_id == prepared.asset_set_id
    task = load_task(copy / "task.yaml")
    for role, entry in checked.manifest["roles"].items():
        package = task.entity(entry["entity_id"]).asset.package
        assert package == f"assets/{entry['content_sha256']}/asset.catalog.json"
        assert (copy / package).is_file()
        assert (copy / f"assets/{entry['content_sha256']}/.assetcast/snapshot.json").is_file(), role
    assert set(checked.manifest) == {
        "schema_version", "batch_index", "seed", "asset_set_id", "requirements_digest", "roles",
        "files",
    }


def test_changed_byte_is_named(copy: Path) -> None:
    rel = a_mesh(copy)
    data = bytearray((copy / rel).read_bytes())
    data[len(data) // 2] ^= 1
    (copy / rel).write_bytes(bytes(data))
    with pytest.raises(DeploymentInvalid, match=f"{copy / rel}: SHA-256 differs"):
        validate_deployment(copy)


def test_extra_file_is_named(copy: Path) -> None:
    (copy / "assets" / "notes.txt").write_text("hello")
    with pytest.raises(DeploymentInvalid, match=f"{copy / 'assets/notes.txt'}: file is not listed"):
        validate_deployment(copy)


def test_missing_file_is_named(copy: Path) -> None:
    rel = a_mesh(copy)
    (copy / rel).unlink()
    with pytest.raises(DeploymentInvalid, match=f"{copy / rel}: file listed in the manifest is"):
        validate_deployment(copy)


def test_manifest_edit_is_detected(prepared: Deployment, copy: Path) -> None:
    manifest_path = copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["asset_set_id"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    with pytest.raises(DeploymentInvalid, match=f"{manifest_path}: manifest digest"):
        validate_deployment(copy, expected_manifest_sha256=prepared.manifest_sha256)


def test_manifest_digest_edit_is_caught_even_without_the_recorded_digest(copy: Path) -> None:
    manifest_path = copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["files"]["task.yaml"] = sha256_hex(b"something else")
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(DeploymentInvalid, match=f"{copy / 'task.yaml'}: SHA-256 differs"):
        validate_deployment(copy)


def test_non_role_packages_are_copied_in(prepared: Deployment, tmp_path: Path) -> None:
    """A static entity's package (relative to the task file) travels with the deployment."""
    task_dir = tmp_path / "task"
    shutil.copytree(prepared.path / "assets", task_dir / "props")
    static_sha = prepared.manifest["roles"]["bin"]["content_sha256"]
    shutil.rmtree(task_dir / "props" / static_sha / ".assetcast")
    text = DEMO_TASK.read_text().replace(
        "program:",
        "    - entity_id: shelf\n      position_m: [0.25, 0.0]\n"
        f"      asset: {{package: props/{static_sha}/asset.catalog.json}}\nprogram:",
    )
    (task_dir / "task.yaml").write_text(text)
    spec = load_task(task_dir / "task.yaml")
    requirements = spec.asset_requirements
    assert requirements is not None
    pools = {
        role: [read_snapshot(prepared.path / f"assets/{entry['content_sha256']}")]
        for role, entry in prepared.manifest["roles"].items()
    }
    resolved = resolve_asset_set(
        requirements, pools, seed=0, max_candidates_per_role=4, max_search_nodes=100
    )
    out = tmp_path / "out" / "batch_0000"
    deployment = materialize_deployment(
        task_dir / "task.yaml", requirements, resolved, output_dir=out, batch_index=0
    )
    shutil.rmtree(task_dir)  # nothing outside the deployment may be needed any more
    checked = validate_deployment(out, expected_manifest_sha256=deployment.manifest_sha256)
    shelf = load_task(out / "task.yaml").entity("shelf").asset.package
    assert shelf == "entities/shelf/asset.catalog.json"
    assert shelf in checked.manifest["files"]
    assert [p.name for p in out.parent.iterdir()] == ["batch_0000"]


def test_failed_materialization_leaves_nothing_behind(
    prepared: Deployment, tmp_path: Path
) -> None:
    spec = load_task(DEMO_TASK)
    requirements = spec.asset_requirements
    assert requirements is not None
    pools = {
        role: [read_snapshot(prepared.path / f"assets/{entry['content_sha256']}")]
        for role, entry in prepared.manifest["roles"].items()
    }
    resolved = resolve_asset_set(
        requirements, pools, seed=0, max_candidates_per_role=4, max_search_nodes=100
    )
    broken = tmp_path / "broken"
    shutil.copytree(prepared.path / "assets", broken)
    (broken / prepared.manifest["roles"]["item"]["content_sha256"] / "evil").symlink_to("/etc")
    moved = {role: read_snapshot(broken / a.content_sha256) for role, a in resolved.assets.items()}

    out = tmp_path / "out"
    with pytest.raises(AssetValidationError, match="evil: symbolic links are not allowed"):
        materialize_deployment(
            DEMO_TASK, requirements, replace(resolved, assets=moved),
            output_dir=out / "batch_0000", batch_index=0,
        )
    assert list(out.iterdir()) == []
    (out / ".batch_0001.partial-0123456789ab.3-abc").mkdir()  # a dead session's
    (out / ".batch_0002.partial-ba9876543210.4-abc").mkdir()  # a live session's
    (out / ".batch_0003.partial-abc").mkdir()  # nobody's: cannot be proven dead
    removed = remove_temp_dirs(out, lambda owner: owner == "0123456789ab")
    assert [p.name for p in removed] == [".batch_0001.partial-0123456789ab.3-abc"]
    assert sorted(p.name for p in out.iterdir()) == [
        ".batch_0002.partial-ba9876543210.4-abc", ".batch_0003.partial-abc",
    ]


def test_manifest_role_edit_is_caught_without_the_recorded_digest(copy: Path) -> None:
    manifest_path = copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    item, bin_ = manifest["roles"]["item"], manifest["roles"]["bin"]
    manifest["roles"]["item"], manifest["roles"]["bin"] = (
        {**bin_, "entity_id": "item"}, {**item, "entity_id": "bin"}
    )
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(DeploymentInvalid, match=f"{manifest_path}: role 'bin' disagrees"):
        validate_deployment(copy)


class LostFence:
    tag = "0123456789ab.2"

    def check(self) -> None:
        raise SessionLost("lease of '0123456789ab' (token 2) was lost")


def test_a_lost_session_neither_publishes_nor_replaces_a_deployment(
    prepared: Deployment, tmp_path: Path
) -> None:
    """The stale session must not put a batch folder in place, nor take away the one the
    session that took over already published."""
    spec = load_task(DEMO_TASK)
    requirements = spec.asset_requirements
    assert requirements is not None
    pools = {
        role: [read_snapshot(prepared.path / f"assets/{entry['content_sha256']}")]
        for role, entry in prepared.manifest["roles"].items()
    }
    resolved = resolve_asset_set(
        requirements, pools, seed=0, max_candidates_per_role=4, max_search_nodes=100
    )
    out = tmp_path / "out"
    with pytest.raises(SessionLost):
        materialize_deployment(
            DEMO_TASK, requirements, resolved, output_dir=out / "batch_0000", batch_index=0,
            fence=LostFence(),
        )
    assert list(out.iterdir()) == []
    published = materialize_deployment(
        DEMO_TASK, requirements, resolved, output_dir=out / "batch_0000", batch_index=0
    )
    before = (published.path / "manifest.json").read_bytes()
    with pytest.raises(SessionLost):
        materialize_deployment(
            DEMO_TASK, requirements, resolved, output_dir=out / "batch_0000", batch_index=0,
            fence=LostFence(),
        )
    assert [p.name for p in out.iterdir()] == ["batch_0000"]
    assert validate_deployment(out / "batch_0000").manifest_sha256 == published.manifest_sha256
    assert (out / "batch_0000" / "manifest.json").read_bytes() == before
    inode = (out / "batch_0000").stat().st_ino
    again = materialize_deployment(
        DEMO_TASK, requirements, resolved, output_dir=out / "batch_0000", batch_index=0
    )
    assert again.manifest_sha256 == published.manifest_sha256
    assert (out / "batch_0000").stat().st_ino == inode  # identical: left in place, not swapped
    assert [p.name for p in out.iterdir()] == ["batch_0000"]
