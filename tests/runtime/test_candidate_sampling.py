"""Selection that does not silently narrow diversity: a capped listing samples the whole
catalog with the seed, keeps the task's aliased categories, and merged catalogs list a
duplicated package once."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from domain.assets import AssetQuery
from domain.config import CollectionConfig
from domain.requirements import AssetRequirements, RoleRequirement
from runtime.assets.demo_catalog import write_demo_catalog
from runtime.assets.providers import (
    DirectoryAssetProvider,
    MergedAssetProvider,
    provider_from_description,
)
from runtime.preparation.candidates import (
    list_candidates,
    listing_query,
    listing_seed,
    listing_stats,
)
from runtime.prepare import prepare
from store import InMemoryEventStore
from tests.runtime.catalog_fixtures import block_catalog, box_package

DEMO_TASK = Path(__file__).resolve().parents[2] / "runtime" / "demo" / "task.yaml"
BLOCKS = AssetQuery(category="block", capabilities=("antipodal_grasp",))


@pytest.fixture(scope="module")
def blocks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = block_catalog(tmp_path_factory.mktemp("blocks"), 45)
    box_package(root / "zz-bin", "zz-bin", category="bin", capabilities=("container",))
    return root


def _ids(provider: object, query: AssetQuery, limit: int, seed: int | None) -> list[str]:
    return [c.candidate_id for c in list_candidates(provider, query, limit, seed)]  # type: ignore[arg-type]


def test_a_capped_listing_is_a_seeded_sample_of_the_whole_catalog(blocks: Path) -> None:
    provider = DirectoryAssetProvider(blocks)
    everything = {f"block-{i:02d}" for i in range(1, 46)}
    # Without a seed (a provider that does not sample) the cap keeps the path order.
    assert _ids(provider, BLOCKS, 8, None) == [f"block-{i:02d}" for i in range(1, 9)]
    first = _ids(provider, BLOCKS, 8, listing_seed(0, "item"))
    assert first == _ids(DirectoryAssetProvider(blocks), BLOCKS, 8, listing_seed(0, "item"))
    assert first != [f"block-{i:02d}" for i in range(1, 9)] and set(first) <= everything
    seen: set[str] = set()
    seeds_needed = None
    for seed in range(60):
        seen |= set(_ids(provider, BLOCKS, 8, listing_seed(seed, "item")))
        if seen == everything:
            seeds_needed = seed + 1
            break
    assert seeds_needed is not None, sorted(everything - seen)
    # Another role on the same catalog with the same run seed draws its own sample.
    assert _ids(provider, BLOCKS, 8, listing_seed(0, "other")) != first
    # Relevance still comes first: the bin never displaces a block under the cap.
    assert "zz-bin" not in _ids(provider, BLOCKS, 45, listing_seed(3, "item"))
    assert _ids(provider, BLOCKS, 46, listing_seed(3, "item"))[-1] == "zz-bin"


def test_aliased_categories_survive_a_small_cap(tmp_path: Path) -> None:
    root = tmp_path / "cat"
    for index in range(12):  # plenty of unrelated assets with the same capability
        box_package(root / f"crate-{index:02d}", f"crate-{index:02d}", category="crate",
                    capabilities=("support_surface",))
    for name in ("platform", "plate", "tray"):
        box_package(root / f"{name}-01", f"{name}-01", category=name,
                    capabilities=("support_surface",))
    requirements = AssetRequirements(
        roles={"base": RoleRequirement(
            "base", "base", AssetQuery("platform", capabilities=("support_surface",)), None
        )},
        category_aliases={"plate": "platform", "tray": "plate", "cube": "block"},
    )
    query = listing_query(requirements, "base")
    assert query.category is None  # providers do not know the aliases: no filtering
    assert query.preferred_categories == ("plate", "platform", "tray")
    provider = DirectoryAssetProvider(root)
    for seed in range(5):
        assert sorted(_ids(provider, query, 3, listing_seed(seed, "base"))) == [
            "plate-01", "platform-01", "tray-01"
        ]


def test_merged_catalogs_list_a_duplicate_once(tmp_path: Path) -> None:
    first = block_catalog(tmp_path / "a" / "blocks", 3)
    second = tmp_path / "b" / "blocks"
    second.mkdir(parents=True)
    shutil.copytree(first / "block-02", second / "block-02")  # same bytes: same identity
    box_package(second / "block-01", "block-01", side=0.05)  # same name, other content
    shutil.copytree(first / "block-03", second / "copy-of-03")  # other folder, same identity
    provider = MergedAssetProvider([first, second])
    assert provider.labels == ["blocks~1", "blocks~2"]
    ids = _ids(provider, BLOCKS, 50, None)
    assert ids == ["blocks~1/block-01", "blocks~1/block-02", "blocks~1/block-03",
                   "blocks~2/block-01"]
    assert sorted(provider.duplicates) == [
        ("blocks~2/block-02", "blocks~1/block-02"), ("blocks~2/copy-of-03", "blocks~1/block-03")
    ]
    rebuilt = provider_from_description(provider.describe())
    assert provider.describe() == {"kind": "directories", "roots": [str(first), str(second)]}
    assert _ids(rebuilt, BLOCKS, 50, None) == ids
    assert len(_ids(provider, BLOCKS, 50, 7)) == 4


def test_prepare_samples_with_the_run_seed_and_merges_catalogs(tmp_path: Path) -> None:
    blocks = block_catalog(tmp_path / "blocks", 10)
    extra = block_catalog(tmp_path / "extra", 3, prefix="cube")
    shutil.copytree(blocks / "block-05", extra / "block-05")
    demo = tmp_path / "demo"
    write_demo_catalog(demo)
    bins = tmp_path / "bins"
    shutil.copytree(demo / "bin-180x140", bins / "bin-180x140")
    store = InMemoryEventStore()

    def listed(seed: int, out: str) -> list[str]:
        result = prepare(
            DEMO_TASK,
            {"item": MergedAssetProvider([blocks, extra]), "bin": DirectoryAssetProvider(bins)},
            cfg=CollectionConfig(seed=seed, candidates_per_role=6), output_dir=tmp_path / out,
            store=store,
        )
        [ids] = [
            e.payload["candidate_ids"] for e in store.read(result.run_id)
            if e.type == "CandidatesListed" and e.payload["role"] == "item"
        ]
        return ids

    first = listed(1, "a")
    assert first == listed(1, "b") and len(first) == 6
    seen: set[str] = set()
    for seed in range(2, 40):
        seen |= set(listed(seed, f"s{seed}"))
        if len(seen) == 13:
            break
    assert "extra/block-05" not in seen  # the duplicate is listed once, from the first catalog
    assert seen == {f"blocks/block-{i:02d}" for i in range(1, 11)} | {
        f"extra/cube-{i:02d}" for i in range(1, 4)
    }


class _OldStyleProvider:
    """A provider written before seeded sampling: ``candidates(query, limit)`` only."""

    def __init__(self, root: Path) -> None:
        self.inner = DirectoryAssetProvider(root)
        self.last_listing = SimpleNamespace(available=1, duplicates=-3)  # cannot be true

    def describe(self) -> dict:
        return self.inner.describe()

    def candidates(self, query: AssetQuery, limit: int) -> list:
        return self.inner.candidates(query, limit)

    def materialize(self, candidate, context):  # type: ignore[no-untyped-def]
        return self.inner.materialize(candidate, context)


def test_a_provider_without_seed_is_called_as_before_and_its_bad_stats_ignored(
    blocks: Path,
) -> None:
    provider = _OldStyleProvider(blocks)
    assert _ids(provider, BLOCKS, 3, 12345) == ["block-01", "block-02", "block-03"]
    assert listing_stats(provider, 3) == {}
    directory = DirectoryAssetProvider(blocks)
    directory.candidates(BLOCKS, 3, seed=1)
    assert listing_stats(directory, 3) == {"available": 46, "duplicates": 0}
