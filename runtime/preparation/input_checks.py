"""Input checks that run before the first event is appended, so bad input (exit 2) leaves
neither the store nor the output directory touched."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from domain.assets import AssetProvider
from domain.canonical import canonical_json
from domain.errors import AssetcastInputError
from domain.requirements import AssetRequirements
from domain.task import TaskSpec
from runtime.preparation.errors import ProviderContractError


def check_providers(
    providers_by_role: Mapping[str, Any], requirements: AssetRequirements
) -> None:
    """Exactly one provider per declared role, each implementing the protocol."""
    declared, given = set(requirements.roles), set(providers_by_role)
    if declared != given:
        parts = []
        if declared - given:
            parts.append(f"missing {sorted(declared - given)}")
        if given - declared:
            parts.append(f"extra {sorted(given - declared)}")
        raise AssetcastInputError(
            "providers must cover exactly the task's roles " + f"{sorted(declared)}: "
            + "; ".join(parts)
        )
    for role in sorted(providers_by_role):
        if not isinstance(providers_by_role[role], AssetProvider):
            raise ProviderContractError(
                f"provider for role {role!r} does not implement AssetProvider"
                " (describe, candidates, materialize)"
            )


def check_output_dir(output_dir: str | Path) -> Path:
    output = Path(output_dir).resolve()
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise AssetcastInputError(f"output directory is not empty: {output}")
    return output


def requirements_of(spec: TaskSpec, task_path: Path) -> AssetRequirements:
    if spec.asset_requirements is None:
        raise AssetcastInputError(f"{task_path}: asset_requirements: the task declares no roles")
    return spec.asset_requirements


def describe_providers(providers_by_role: Mapping[str, AssetProvider]) -> dict[str, Any]:
    """Each provider's ``describe()``, which must be a JSON dict: it goes into ``RunCreated``
    and is what resume rebuilds the providers from."""
    descriptions: dict[str, Any] = {}
    for role in sorted(providers_by_role):
        description = providers_by_role[role].describe()
        try:
            canonical_json(description)
        except (TypeError, ValueError) as error:
            raise ProviderContractError(
                f"provider for role {role!r}: describe() is not JSON ({error})"
            ) from error
        if not isinstance(description, dict):
            raise ProviderContractError(f"provider for role {role!r}: describe() is not a dict")
        descriptions[role] = description
    return descriptions


def providers_from_catalog_args(arguments: Sequence[str]) -> dict[str, AssetProvider]:
    """Turn ``--catalog ROLE=DIR`` arguments into catalog-folder providers (never online).

    A role given several folders gets them merged (``MergedAssetProvider``: duplicates by
    content identity listed once); the same folder given twice counts once."""
    from runtime.assets.providers import DirectoryAssetProvider, MergedAssetProvider

    folders: dict[str, list[Path]] = {}
    for argument in arguments:
        role, sep, directory = argument.partition("=")
        role, directory = role.strip(), directory.strip()
        if not sep or not role or not directory:
            raise AssetcastInputError(f"--catalog {argument!r}: expected ROLE=DIR")
        if not Path(directory).is_dir():
            raise AssetcastInputError(f"--catalog {argument!r}: {directory} is not a directory")
        resolved = Path(directory).resolve()
        mine = folders.setdefault(role, [])
        if resolved not in mine:
            mine.append(resolved)
    return {
        role: DirectoryAssetProvider(dirs[0]) if len(dirs) == 1 else MergedAssetProvider(dirs)
        for role, dirs in folders.items()
    }
