"""Deployments by content: a worker rebuilds a deployment in its own cache from bytes, and
refuses bytes that do not match their digests (before writing or building anything)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from domain.canonical import sha256_hex
from runtime.collection.deployment_transfer import (
    DeploymentDigestMismatch,
    materialize_package,
    pack_deployment,
)
from runtime.collection.executors import BatchWork, WorkSettings
from runtime.collection.executors.worker import BatchWorker
from tests.runtime.demo_runs import prepared


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, catalog: Path) -> tuple[Path, str]:
    from store import InMemoryEventStore

    store = InMemoryEventStore()
    out = tmp_path_factory.mktemp("transfer") / "out"
    run_id = prepared(store, out, catalog, batches=1, cameras=False)
    [batch] = store.state(run_id).batches.values()
    return out / batch.deployment["deployment_path"], batch.deployment["manifest_sha256"]


def test_a_package_materializes_byte_for_byte_in_the_workers_own_cache(
    deployment: tuple[Path, str], tmp_path: Path
) -> None:
    path, digest = deployment
    package = pack_deployment(path, digest, 0)
    copy = materialize_package(package, tmp_path / "cache")
    assert copy.path == (tmp_path / "cache" / digest).resolve()
    assert copy.manifest_sha256 == digest
    for rel in package.files:
        assert (copy.path / rel).read_bytes() == (path / rel).read_bytes()
    # a second use is a cache hit that still verifies; a damaged entry is rewritten
    rel = sorted(package.files)[0]
    (copy.path / rel).write_bytes(b"damaged")
    again = materialize_package(package, tmp_path / "cache")
    assert sha256_hex((again.path / rel).read_bytes()) == sha256_hex(package.files[rel])


def test_a_file_whose_bytes_differ_from_the_manifest_is_refused_by_name(
    deployment: tuple[Path, str], tmp_path: Path
) -> None:
    path, digest = deployment
    package = pack_deployment(path, digest, 0)
    rel = sorted(package.files)[-1]
    tampered = dataclasses.replace(package, files={**package.files, rel: b"not the asset"})
    expected = rf"deployment of batch 0: {rel} has SHA-256 "
    with pytest.raises(DeploymentDigestMismatch, match=expected):
        materialize_package(tampered, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()  # nothing written


def test_a_manifest_other_than_the_recorded_one_is_refused(
    deployment: tuple[Path, str], tmp_path: Path
) -> None:
    path, digest = deployment
    package = dataclasses.replace(pack_deployment(path, digest, 0), manifest_sha256="0" * 64)
    with pytest.raises(
        DeploymentDigestMismatch,
        match=r"manifest.json has SHA-256 [0-9a-f]{64}, the run recorded 0{64}",
    ):
        materialize_package(package, tmp_path / "cache")


def test_a_worker_refuses_a_mismatching_deployment_before_building(
    deployment: tuple[Path, str], tmp_path: Path
) -> None:
    path, digest = deployment
    built: list[Path] = []

    def factory(deployment_dir: Path, **_: object) -> object:
        built.append(deployment_dir)
        raise AssertionError("never built")

    settings = WorkSettings(factory, 0, False, None, None)
    worker = BatchWorker(settings, "w0", cache_root=tmp_path / "cache")
    package = pack_deployment(path, digest, 0)
    rel = sorted(package.files)[0]
    work = BatchWork(0, "set", 0, path, digest, (0,), package=dataclasses.replace(
        package, files={**package.files, rel: b"x"}
    ))
    with pytest.raises(DeploymentDigestMismatch, match=rel):
        worker.open(work)
    assert built == [] and worker.where is not None
    assert worker.where.phase == "validate_deployment"
