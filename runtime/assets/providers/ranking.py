"""Listing entries and their order: what every local provider shares.

Listing is cheap and forgiving, preparation is strict. Each catalog file is parsed only to
rank it; a package whose catalog file cannot be parsed is still listed (``descriptor=None``,
``listing_error`` set) so that preparing it fails and the failure is recorded as a rejection
of that one candidate, instead of one broken package aborting the listing of a whole catalog.

Ranking: exact category matches first (or one of the query's ``preferred_categories``, the
task's aliases), then everything else (the matcher decides). Within each group, packages that
carry every requested capability and attribute come first, so a catalog truncated to ``limit``
keeps the packages most likely to match. Ties are ordered by ``seed``: a hash of the seed and
the candidate id, so a cap samples the whole catalog (not the first N by path) and the same
seed draws the same sample. Without a seed ties keep the provider's order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from domain.assets import AssetCandidate, AssetQuery
from domain.canonical import sha256_json
from domain.errors import AssetValidationError
from domain.fields import forbidden_character
from runtime.assets.package import read_manifest


@dataclass(frozen=True)
class ListingStats:
    """What a provider's last listing saw before its cap: every package it considered
    (``available``) and the ones it listed once as duplicates of another. Local providers
    keep it as ``last_listing``; preparation records it beside the listed ids."""

    available: int
    duplicates: int = 0


def checked_id(candidate_id: str) -> str:
    """A candidate id is a folder name or path that goes into the log and onto terminals:
    one with a control character (a newline, ESC) is refused, not recorded."""
    bad = forbidden_character(candidate_id)
    if bad is not None:
        raise AssetValidationError(
            f"candidate {candidate_id!r}: folder name contains a control character ({bad!r})"
        )
    return candidate_id


def listing(candidate_id: str, package_dir: Path) -> AssetCandidate:
    checked_id(candidate_id)
    try:
        descriptor = read_manifest(package_dir).descriptor
    except AssetValidationError as exc:
        return AssetCandidate(candidate_id, str(package_dir), None, listing_error=str(exc))
    return AssetCandidate(candidate_id, str(package_dir), descriptor)


def _relevance(candidate: AssetCandidate, query: AssetQuery | None) -> tuple[bool, bool, bool]:
    """How well a listing answers ``query``: category, then capabilities, then attributes.

    Attributes compare exact-typed (``True`` is not ``1``), as the matcher does.
    """
    descriptor = candidate.descriptor
    if descriptor is None or query is None:
        return (False, False, False)
    category = descriptor.category == query.category or (
        descriptor.category in query.preferred_categories
    )
    capabilities = set(query.capabilities) <= set(descriptor.capabilities)
    attributes = all(
        name in descriptor.attributes
        and type(descriptor.attributes[name]) is type(value)
        and descriptor.attributes[name] == value
        for name, value in query.attributes.items()
    )
    return (category, capabilities, attributes)


def sample_key(seed: int, candidate_id: str) -> str:
    """Where a candidate falls in the seed's permutation of a catalog."""
    return sha256_json(["assetcast-sample", seed, candidate_id])


def rank_candidates(
    candidates: Iterable[AssetCandidate],
    query: AssetQuery | None,
    limit: int,
    seed: int | None = None,
) -> list[AssetCandidate]:
    """Most relevant first, ties in the seed's order (or as given); at most ``limit``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be a non-negative int, got {limit!r}")
    listed = list(candidates)
    if seed is not None:
        listed.sort(key=lambda c: sample_key(seed, c.candidate_id))
    listed.sort(key=lambda c: _relevance(c, query), reverse=True)
    return listed[:limit]
