"""An imported asset's physics: what the flags say over what the source states.

``--mass``/``--density``/``--friction`` are checked with errors naming the flag; a URDF's
``<inertial>`` mass and pybullet ``<contact>`` friction (``urdf``) fill what the flags leave
open, and the descriptor's ``provenance.physics_from`` says where each value came from.
"""

from __future__ import annotations

from typing import Any

from domain.asset_physics import FRICTION_KINDS, AssetPhysics
from domain.errors import AssetValidationError


def flag_physics_of(
    mass_kg: float | None, density_kg_m3: float | None, friction: tuple[float, ...] | None
) -> dict[str, Any]:
    """``--mass``/``--density``/``--friction`` as descriptor physics; errors name the flag."""
    flags = {"mass_kg": "--mass", "density_kg_m3": "--density", "friction": "--friction"}
    raw: dict[str, Any] = {}
    if mass_kg is not None:
        raw["mass_kg"] = mass_kg
    if density_kg_m3 is not None:
        raw["density_kg_m3"] = density_kg_m3
    if friction is not None:
        if not 1 <= len(friction) <= len(FRICTION_KINDS):
            raise AssetValidationError(
                "--friction: expected SLIDING[,TORSIONAL[,ROLLING]], got "
                f"{len(friction)} numbers"
            )
        raw["friction"] = dict(zip(FRICTION_KINDS, friction, strict=False))
    if "mass_kg" in raw and "density_kg_m3" in raw:
        raise AssetValidationError("--density: give --mass or --density, not both")
    if not raw:
        return raw
    try:
        AssetPhysics.from_dict(raw, path="physics")
    except AssetValidationError as error:
        text = str(error).removeprefix("physics.")
        field_name, _, detail = text.partition(": ")
        head, _, kind = field_name.partition(".")
        flag = flags.get(head, head) + (f" ({kind})" if kind else "")
        raise AssetValidationError(f"{flag}: {detail}") from None
    return raw


def merged_physics(
    flags: dict[str, Any], stated: dict[str, Any], stated_source: dict[str, str], label: str
) -> tuple[AssetPhysics | None, dict[str, str]]:
    """The flags' physics over what the source states (a URDF's mass and friction): a flag
    wins per value, and ``--mass``/``--density`` replace a stated mass."""
    merged: dict[str, Any] = {}
    source: dict[str, str] = {}
    if "mass_kg" in stated and not ({"mass_kg", "density_kg_m3"} & set(flags)):
        merged["mass_kg"], source["mass_kg"] = stated["mass_kg"], stated_source["mass_kg"]
    friction = dict(stated.get("friction", {}))
    for kind in friction:
        source[f"friction.{kind}"] = stated_source[f"friction.{kind}"]
    for key in ("mass_kg", "density_kg_m3"):
        if key in flags:
            merged[key] = flags[key]
            source[key] = {"mass_kg": "--mass", "density_kg_m3": "--density"}[key]
    for kind, value in flags.get("friction", {}).items():
        friction[kind], source[f"friction.{kind}"] = value, "--friction"
    if friction:
        merged["friction"] = friction
    if not merged:
        return None, {}
    try:
        return AssetPhysics.from_dict(merged, path="physics", source=label), source
    except AssetValidationError as error:  # a stated value the flags did not replace
        raise AssetValidationError(f"{error} (override it with --mass/--friction)") from None
