"""``assetcast catalog demo|check|import``: write the procedural demo catalog, validate every
asset package in a folder before a run relies on it (a failing package is bad input), or
turn a mesh from elsewhere into a normalized package."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from runtime.cli.exit_codes import EXIT_BAD_INPUT, EXIT_OK, PROG, UsageError
from runtime.cli.output import one_line, out


def cmd_catalog_missing(args: argparse.Namespace) -> int:  # pragma: no cover - argparse guards
    raise UsageError("catalog: choose demo or check")


def cmd_catalog_demo(args: argparse.Namespace) -> int:
    from runtime.assets.demo_catalog import write_demo_catalog

    written = write_demo_catalog(Path(args.dir))
    out(f"demo catalog: {len(written)} packages in {Path(args.dir).absolute()}")
    return EXIT_OK


def cmd_catalog_check(args: argparse.Namespace) -> int:
    from runtime.assets.demo_catalog import check_catalog
    from runtime.cli.run_commands import collection_config

    results = check_catalog(Path(args.dir), limits=collection_config(args).mesh_limits)
    failed = 0
    for check in results:
        if check.ok:
            out(f"ok    {check.path}: {check.reason}")
            for warning in check.warnings:
                out(f"warn  {check.path}: {one_line(warning)}")
        else:
            failed += 1
            out(f"FAIL  {check.path}: {one_line(check.reason)}")
    if failed:
        sys.stderr.write(f"{PROG}: error: {failed} of {len(results)} package(s) failed\n")
        return EXIT_BAD_INPUT
    return EXIT_OK


def _attribute(text: str) -> tuple[str, Any]:
    """``k=v``: ``v`` is a JSON number or boolean when it reads as one, else a string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"--attribute: expected KEY=VALUE, got {text!r}")
    try:
        decoded = json.loads(value)
    except ValueError:
        return key, value
    return key, decoded if isinstance(decoded, bool | int | float) else value


def _friction(text: str | None) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise UsageError(
            f"--friction: expected SLIDING[,TORSIONAL[,ROLLING]] numbers, got {text!r}"
        ) from None


def _asset_ids(sources: list[str], given: str | None) -> list[str]:
    """``--id`` for one source, else each source's file name without its extension."""
    if given is not None:
        if len(sources) > 1:
            raise UsageError(
                f"--id: names one package; with {len(sources)} sources each is named after "
                "its file"
            )
        return [given]
    ids = [Path(source).stem for source in sources]
    for index, asset_id in enumerate(ids):
        if asset_id in ids[:index]:
            first = sources[ids.index(asset_id)]
            raise UsageError(
                f"--id: {first} and {sources[index]} would both be named {asset_id!r}; "
                "import them separately with --id"
            )
    return ids


def _print_imported(result: Any) -> None:
    bounds = result.descriptor.bounds_m
    assert bounds is not None
    size = " x ".join(f"{extent:.4g}" for extent in bounds.extents)
    verb = "imported" if result.written else "unchanged"
    out(
        f"{verb} {result.descriptor.asset_id}: {result.package_dir} "
        f"({result.faces} faces, {size} m)"
    )
    if result.descriptor.physics is not None:
        out(f"  physics: {json.dumps(result.descriptor.physics.to_dict(), sort_keys=True)}")
    for name in ("container_region", "support_region"):
        region = getattr(result.descriptor, name)
        if region is not None:
            out(f"  {name} (estimated): lower={list(region.lower)} upper={list(region.upper)}")
    for dropped in result.descriptor.provenance.get("dropped_references", ()):
        out(f"  dropped missing reference {dropped['reference']!r} ({dropped['where']})")


def cmd_catalog_import(args: argparse.Namespace) -> int:
    """One package per source. With several sources a failing one is a ``FAIL`` line and the
    others are still imported (each package is written whole or not at all); exit 2 if any
    failed, as ``catalog check`` does."""
    from dataclasses import replace

    from domain.errors import AssetcastInputError
    from runtime.assets.importing import ImportOptions, import_asset
    from runtime.cli.run_commands import collection_config

    sources = list(args.source)
    ids = _asset_ids(sources, args.id)
    attributes = dict(_attribute(text) for text in args.attribute or [])
    options = ImportOptions(
        asset_id=ids[0],
        category=args.category,
        capabilities=tuple(args.capability or []),
        attributes=attributes,
        up=args.up,
        scale=args.scale,
        centring=args.centre,
        container=args.container,
        support=args.support,
        pouring=args.pouring,
        drop_missing_references=args.drop_missing_references,
        limits=collection_config(args).mesh_limits,
        mass_kg=args.mass,
        density_kg_m3=args.density,
        friction=_friction(args.friction),
    )
    if len(sources) == 1:
        _print_imported(import_asset(Path(sources[0]), Path(args.out), options))
        return EXIT_OK
    failed = 0
    for source, asset_id in zip(sources, ids, strict=True):
        try:
            result = import_asset(Path(source), Path(args.out), replace(options, asset_id=asset_id))
        except AssetcastInputError as error:
            failed += 1
            out(f"FAIL  {source}: {one_line(error)}")
            continue
        _print_imported(result)
    if failed:
        sys.stderr.write(f"{PROG}: error: {failed} of {len(sources)} source(s) failed\n")
        return EXIT_BAD_INPUT
    return EXIT_OK
