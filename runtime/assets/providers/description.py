"""Rebuilding a provider from its ``describe()`` output (what ``RunCreated`` records), so a
resumed run lists from exactly the catalogs it started with."""

from __future__ import annotations

from typing import Any

from domain.errors import AssetValidationError
from runtime.assets.providers.directory import DirectoryAssetProvider
from runtime.assets.providers.explicit import ExplicitAssetProvider
from runtime.assets.providers.merged import MergedAssetProvider

LocalProvider = DirectoryAssetProvider | ExplicitAssetProvider | MergedAssetProvider

_FIELDS = {
    "directory": {"kind", "root"},
    "explicit": {"kind", "paths"},
    "directories": {"kind", "roots"},
}


def _paths(description: dict[str, Any], key: str, minimum: int) -> list[str]:
    paths = description[key]
    if (
        not isinstance(paths, list) or len(paths) < minimum
        or not all(isinstance(p, str) and p for p in paths)
    ):
        need = f"at least {minimum} " if minimum > 1 else ""
        raise AssetValidationError(
            f"provider description: {key}: expected a list of {need}path strings"
        )
    return paths


def provider_from_description(description: Any) -> LocalProvider:
    """Rebuild a provider from its ``describe()`` output (used when resuming a run)."""
    if not isinstance(description, dict):
        raise AssetValidationError("provider description: expected an object")
    kind = description.get("kind")
    expected = _FIELDS.get(kind)  # type: ignore[arg-type]
    if expected is None:
        raise AssetValidationError(f"provider description: kind: unknown provider {kind!r}")
    for key in sorted(set(description) ^ expected):
        state = "unknown field" if key in description else "required field is missing"
        raise AssetValidationError(f"provider description: {key}: {state}")
    if kind == "directory":
        root = description["root"]
        if not isinstance(root, str) or not root:
            raise AssetValidationError("provider description: root: expected a path string")
        return DirectoryAssetProvider(root)
    if kind == "directories":
        return MergedAssetProvider(_paths(description, "roots", 2))
    return ExplicitAssetProvider(_paths(description, "paths", 1))
