"""Talking to a provider with its contract enforced: a provider is outside code, so what it
returns is checked before it becomes a fact in the log."""

from __future__ import annotations

import inspect
from itertools import islice
from pathlib import Path
from typing import Any

import structlog

from domain.assets import (
    AssetCandidate,
    AssetProvider,
    AssetQuery,
    PreparationContext,
    PreparedAsset,
)
from domain.canonical import sha256_json
from domain.errors import AssetcastError
from domain.requirements import AssetRequirements
from runtime.preparation.errors import ProviderMisbehaved

log = structlog.get_logger(__name__)


def listing_query(requirements: AssetRequirements, role: str) -> AssetQuery:
    """Providers do not know task-owned aliases: with aliases, list every category and let
    the matcher enforce the category exactly, but name the categories that count as the
    role's (``preferred_categories``) so a provider truncating to its limit keeps them."""
    query = requirements.roles[role].query
    if requirements.category_aliases:
        preferred: tuple[str, ...] = ()
        if query.category is not None:
            wanted = requirements.canonical_category(query.category)
            names = {query.category, *requirements.category_aliases,
                     *requirements.category_aliases.values()}
            preferred = tuple(
                sorted(n for n in names if requirements.canonical_category(n) == wanted)
            )
        return AssetQuery(None, query.attributes, query.capabilities, preferred)
    return query


def listing_seed(run_seed: int, role: str) -> int:
    """The seed a role's candidate sample is drawn with: from the run's seed (same seed, same
    sample), different per role (two roles on one catalog are sampled independently)."""
    return int(sha256_json(["assetcast-listing", run_seed, role])[:8], 16)


def _accepts_seed(provider: AssetProvider) -> bool:
    """Whether ``provider.candidates`` takes ``seed=`` (providers written before seeded
    sampling existed do not, and are called as before)."""
    try:
        parameters = inspect.signature(provider.candidates).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.name == "seed" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters
    )


def list_candidates(
    provider: AssetProvider, query: AssetQuery, limit: int, seed: int | None = None
) -> list[AssetCandidate]:
    """At most ``limit`` distinct candidates, or an error describing the contract breach.

    ``seed`` is handed to a provider that samples (``candidates(query, limit, seed=...)``).
    Only ``limit + 1`` items are ever pulled, so an endless provider cannot stall preparation.
    """
    if seed is not None and _accepts_seed(provider):
        listing = provider.candidates(query, limit, seed=seed)  # type: ignore[call-arg]
    else:
        listing = provider.candidates(query, limit)
    items = list(islice(iter(listing), limit + 1))
    if len(items) > limit:
        raise ProviderMisbehaved(f"provider returned more than the requested limit of {limit}")
    seen: set[str] = set()
    for index, item in enumerate(items):
        if not isinstance(item, AssetCandidate):
            raise ProviderMisbehaved(
                f"item {index} is a {type(item).__name__}, not an AssetCandidate"
            )
        if not isinstance(item.candidate_id, str) or not item.candidate_id:
            raise ProviderMisbehaved(f"item {index} has no candidate_id string")
        if item.candidate_id in seen:
            raise ProviderMisbehaved(f"candidate id {item.candidate_id!r} listed twice")
        seen.add(item.candidate_id)
    return items


def listing_stats(provider: AssetProvider, listed: int) -> dict[str, int]:
    """``available``/``duplicates`` of the provider's last listing (``last_listing``, kept by
    the local providers), for ``CandidatesListed``; nothing from a provider without it, or
    with numbers that cannot be true (outside code: never trusted blindly)."""
    stats = getattr(provider, "last_listing", None)
    available = getattr(stats, "available", None)
    duplicates = getattr(stats, "duplicates", 0)
    if not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (available, duplicates)
    ) or available < listed:  # type: ignore[operator]
        return {}
    return {"available": available, "duplicates": duplicates}


def materialize_candidate(
    provider: AssetProvider, candidate: AssetCandidate, context: PreparationContext
) -> PreparedAsset:
    """``provider.materialize``, refusing anything that is not a ``PreparedAsset``."""
    prepared = provider.materialize(candidate, context)
    if not isinstance(prepared, PreparedAsset):
        raise ProviderMisbehaved(
            f"materialize returned a {type(prepared).__name__}, not a PreparedAsset"
        )
    return prepared


def reuse_snapshot(payload: dict[str, Any]) -> PreparedAsset | None:
    """The logged snapshot if it still verifies byte for byte, else ``None`` (redo it)."""
    from runtime.assets.snapshot import read_snapshot, verify_prepared_asset

    try:
        asset = read_snapshot(Path(payload["snapshot_dir"]))
        verify_prepared_asset(asset)
    except (AssetcastError, OSError, ValueError) as error:
        log.warning("prepare.snapshot_unusable", snapshot=payload["snapshot_dir"], error=str(error))
        return None
    if asset.content_sha256 != payload["content_sha256"]:
        return None
    return asset
