"""Listing, ranking and rebuilding local asset providers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from domain.assets import AssetProvider, AssetQuery, PreparationContext
from domain.errors import AssetValidationError
from runtime.assets.demo_catalog import write_demo_catalog
from runtime.assets.providers import (
    DirectoryAssetProvider,
    ExplicitAssetProvider,
    provider_from_description,
)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("catalog")
    write_demo_catalog(root)
    return root


def test_directory_lists_every_package_sorted(catalog: Path) -> None:
    provider = DirectoryAssetProvider(catalog)
    assert isinstance(provider, AssetProvider)
    listed = provider.candidates(None, 1000)
    ids = [c.candidate_id for c in listed]
    assert ids == sorted(p.name for p in catalog.iterdir())
    assert all(c.descriptor is not None and c.listing_error is None for c in listed)
    assert listed[0].locator == str(catalog / ids[0])


def test_exact_category_first_others_retained_and_limit(catalog: Path) -> None:
    provider = DirectoryAssetProvider(catalog)
    listed = provider.candidates(AssetQuery(category="bin"), 1000)
    categories = [c.descriptor.category for c in listed if c.descriptor]
    assert categories[:4] == ["bin"] * 4 and "bin" not in categories[4:]
    assert len(listed) == len(list(catalog.iterdir()))
    assert [c.candidate_id for c in provider.candidates(AssetQuery(category="tray"), 2)] == [
        "tray-140x100", "tray-200x150",
    ]
    assert provider.candidates(AssetQuery(category="cube"), 3) == provider.candidates(None, 3)
    assert provider.candidates(None, 0) == []
    with pytest.raises(ValueError, match="limit must be a non-negative int"):
        provider.candidates(None, -1)


def test_category_free_query_ranks_by_capabilities_then_attributes(catalog: Path) -> None:
    """With aliases the query has no category: a truncated listing must still favour
    packages that carry the requested capabilities and attributes."""
    provider = DirectoryAssetProvider(catalog)
    query = AssetQuery(category=None, attributes={"open_top": True}, capabilities=("container",))
    listed = provider.candidates(query, 7)
    assert len(listed) == 7
    for candidate in listed:
        descriptor = candidate.descriptor
        assert descriptor is not None
        assert "container" in descriptor.capabilities, candidate.candidate_id
        assert descriptor.attributes.get("open_top") is True, candidate.candidate_id
    everything = [c.candidate_id for c in provider.candidates(None, 1000)]
    ids = [c.candidate_id for c in listed]
    assert ids == sorted(ids, key=everything.index)  # ties keep the catalog order


def test_nested_catalog_and_broken_package_is_listed_then_rejected(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_demo_catalog(root / "group" / "sub")
    broken = root / "aaa-broken"
    broken.mkdir()
    (broken / "asset.catalog.json").write_text(
        '{"descriptor": {"asset_id": "x"}, "visual_path": "m.obj"}'
    )
    provider = DirectoryAssetProvider(root)
    listed = provider.candidates(AssetQuery(category="block"), 100)
    assert listed[0].candidate_id == "group/sub/block-030"
    bad = [c for c in listed if c.candidate_id == "aaa-broken"]
    assert len(bad) == 1 and bad[0].descriptor is None
    assert "descriptor.category: required field is missing" in (bad[0].listing_error or "")
    with pytest.raises(AssetValidationError, match=r"descriptor\.category: required field"):
        provider.materialize(bad[0], PreparationContext(str(tmp_path / "cache")))


def test_missing_root_fails_listing(tmp_path: Path) -> None:
    with pytest.raises(AssetValidationError, match=r"nope: catalog folder does not exist"):
        DirectoryAssetProvider(tmp_path / "nope").candidates(None, 5)


def test_explicit_provider_and_materialize(catalog: Path, tmp_path: Path) -> None:
    provider = ExplicitAssetProvider(
        [catalog / "cup-r035" / "asset.catalog.json", catalog / "block-050"]
    )
    listed = provider.candidates(AssetQuery(category="block"), 10)
    assert [Path(c.locator).name for c in listed] == ["block-050", "cup-r035"]
    asset = provider.materialize(listed[0], PreparationContext(str(tmp_path / "cache")))
    assert asset.asset_id == "block-050" and asset.candidate_id == str(catalog / "block-050")
    assert asset.source_locator == str(catalog / "block-050")


def test_describe_round_trips(catalog: Path) -> None:
    explicit = ExplicitAssetProvider([catalog / "bin-080x080"])
    for provider in (DirectoryAssetProvider(catalog), explicit):
        description = json.loads(json.dumps(provider.describe()))
        rebuilt = provider_from_description(description)
        assert type(rebuilt) is type(provider)
        assert rebuilt.describe() == description
        assert rebuilt.candidates(None, 50) == provider.candidates(None, 50)
    assert DirectoryAssetProvider(catalog).describe() == {"kind": "directory", "root": str(catalog)}


@pytest.mark.parametrize(
    ("description", "message"),
    [
        ({"kind": "online", "url": "x"}, r"kind: unknown provider 'online'"),
        ({"kind": "directory"}, r"root: required field is missing"),
        ({"kind": "directory", "root": "/x", "extra": 1}, r"extra: unknown field"),
        ({"kind": "explicit", "paths": "/x"}, r"paths: expected a list of path strings"),
        ([], r"expected an object"),
    ],
)
def test_bad_descriptions(description: object, message: str) -> None:
    with pytest.raises(AssetValidationError, match=r"^provider description: " + message):
        provider_from_description(description)


def test_symlinked_package_folder_is_not_followed(catalog: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    shutil.copytree(catalog / "block-030", root / "block-030")
    (root / "linked").symlink_to(catalog / "block-050", target_is_directory=True)
    assert [c.candidate_id for c in DirectoryAssetProvider(root).candidates(None, 10)] == [
        "block-030"
    ]
