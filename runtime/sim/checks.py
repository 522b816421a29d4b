"""Scene checks that gate acceptance, and the registry users extend with their own.

A check is ``fn(env, spec) -> CheckResult | bool``. Acceptance fails closed: a check
that is unknown, lacks the geometry it needs, or raises is ``unavailable``, and
``checks_accept`` only accepts a non-empty set of ``passed`` results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from domain.task import CheckSpec
from runtime.sim.results import CheckResult

if TYPE_CHECKING:
    from runtime.sim.environment import TaskEnvironment

CheckFn = Callable[["TaskEnvironment", CheckSpec], Any]

_CHECKS: dict[str, CheckFn] = {}


class CheckUnavailable(Exception):
    """Raised inside a check when it cannot be evaluated (missing object or geometry)."""


def register_check(name: str, fn: CheckFn) -> None:
    """Make ``fn`` usable by name in ``checks.initial`` / ``checks.final`` (replaces a name)."""
    if not isinstance(name, str) or not name:
        raise ValueError("check name must be a non-empty string")
    if not callable(fn):
        raise TypeError(f"check {name!r} must be callable")
    _CHECKS[name] = fn


def registered_checks() -> tuple[str, ...]:
    return tuple(sorted(_CHECKS))


def _param(spec: CheckSpec, name: str, default: float) -> float:
    value = spec.params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CheckUnavailable(f"params.{name} must be a number")
    return float(value)


def _entities(env: TaskEnvironment, spec: CheckSpec) -> list[str]:
    if spec.object is None:
        return list(env.order)
    return [_known(env, spec.object, "object")]


def _known(env: TaskEnvironment, entity_id: str | None, what: str) -> str:
    if entity_id is None:
        raise CheckUnavailable(f"the check needs a {what}")
    if entity_id not in env.geometries:
        raise CheckUnavailable(f"{what} {entity_id!r} is not in the scene")
    return entity_id


def _verdict(spec: CheckSpec, ok: bool, detail: str, **metrics: Any) -> CheckResult:
    return CheckResult(spec.check, "passed" if ok else "failed", detail, metrics)


def at_rest(env: TaskEnvironment, spec: CheckSpec) -> CheckResult:
    lin_tol = _param(spec, "linear_m_s", 0.02)
    ang_tol = _param(spec, "angular_rad_s", 0.3)
    worst = ("", 0.0, 0.0)
    for eid in _entities(env, spec):
        lin, ang = env.entity_velocity(eid)
        speed, spin = float(np.linalg.norm(lin)), float(np.linalg.norm(ang))
        if speed / lin_tol + spin / ang_tol > worst[1] / lin_tol + worst[2] / ang_tol:
            worst = (eid, speed, spin)
    ok = worst[1] <= lin_tol and worst[2] <= ang_tol
    detail = "" if ok else f"{worst[0]!r} moves at {worst[1]:.4f} m/s, {worst[2]:.3f} rad/s"
    return _verdict(spec, ok, detail, entity=worst[0], linear_m_s=worst[1], angular_rad_s=worst[2])


def _tilt_deg(env: TaskEnvironment, eid: str) -> float:
    _, rot = env.entity_pose(eid)
    return float(np.degrees(np.arccos(np.clip(rot[2, 2], -1.0, 1.0))))


def _tilt_verdict(spec: CheckSpec, eid: str, tilt: float, tol: float) -> CheckResult:
    """One verdict and message for both tilt checks, so they cannot drift apart."""
    ok = tilt <= tol
    return _verdict(
        spec, ok, "" if ok else f"{eid!r} is tilted {tilt:.1f} deg", entity=eid, tilt_deg=tilt
    )


def upright(env: TaskEnvironment, spec: CheckSpec) -> CheckResult:
    tol = _param(spec, "tolerance_deg", 10.0)
    tilts = {eid: _tilt_deg(env, eid) for eid in _entities(env, spec)}
    eid = max(tilts, key=lambda k: tilts[k])
    return _tilt_verdict(spec, eid, tilts[eid], tol)


def target_upright(env: TaskEnvironment, spec: CheckSpec) -> CheckResult:
    eid = _known(env, spec.target or spec.object, "target")
    tol = _param(spec, "tolerance_deg", 10.0)
    return _tilt_verdict(spec, eid, _tilt_deg(env, eid), tol)


def on_table(env: TaskEnvironment, spec: CheckSpec) -> CheckResult:
    tol = _param(spec, "tolerance_m", 0.005)
    half = np.asarray(env.task.scene.table.size_m) / 2
    for eid in _entities(env, spec):
        lo, hi = env.entity_world_aabb(eid)
        centre = (lo[:2] + hi[:2]) / 2
        if abs(float(lo[2])) > tol:
            return _verdict(
                spec,
                False,
                f"{eid!r} bottom is at z={lo[2]:.4f} m, not on the table",
                entity=eid,
                bottom_z=float(lo[2]),
            )
        if np.any(np.abs(centre) > half):
            return _verdict(
                spec,
                False,
                f"{eid!r} is off the table at {centre.round(3).tolist()}",
                entity=eid,
                centre_xy=centre,
            )
    return _verdict(spec, True, "")


def no_penetration(env: TaskEnvironment, spec: CheckSpec) -> CheckResult:
    tol = _param(spec, "tolerance_m", 0.003)
    contacts = env.contacts()
    if not contacts:
        return _verdict(spec, True, "", max_penetration_m=0.0, contacts=0)
    deepest = min(contacts, key=lambda c: c["dist"])
    depth = max(0.0, -deepest["dist"])
    ok = depth <= tol
    detail = "" if ok else f"{deepest['geom1']} and {deepest['geom2']} overlap {depth:.4f} m"
    return _verdict(spec, ok, detail, max_penetration_m=depth, contacts=len(contacts))


def _region(env: TaskEnvironment, target: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    region = env.geometries[target].region(name)
    if region is None:
        raise CheckUnavailable(f"target {target!r} declares no {name}")
    return region


def inside_region(env: TaskEnvironment, spec: CheckSpec) -> CheckResult:
    """Object's bounds inside the target's container region (target frame, so yaw is exact).

    ``clearance_m`` shrinks the region horizontally; vertically the object may touch the
    floor and must not rise above the region top, both within ``z_tolerance_m``.
    """
    obj = _known(env, spec.object, "object")
    target = _known(env, spec.target, "target")
    clearance = _param(spec, "clearance_m", 0.0)
    z_tol = _param(spec, "z_tolerance_m", 0.003)
    lower, upper = _region(env, target, "container_region")
    local = env.to_entity_frame(target, env.entity_world_points(obj))
    lo, hi = local.min(axis=0), local.max(axis=0)
    margins = np.concatenate(
        [
            lo[:2] - lower[:2] - clearance,
            upper[:2] - hi[:2] - clearance,
            [lo[2] - lower[2] + z_tol, upper[2] - hi[2] + z_tol],
        ]
    )
    ok = bool(np.all(margins >= 0.0))
    names = ("-x", "-y", "+x", "+y", "floor", "top")
    worst = int(np.argmin(margins))
    detail = (
        ""
        if ok
        else (
            f"{obj!r} leaves the container region of {target!r} on side {names[worst]} "
            f"by {-margins[worst]:.4f} m"
        )
    )
    world_lo, world_hi = env.entity_world_aabb(obj)
    return _verdict(
        spec, ok, detail, min_margin_m=float(margins.min()), object_aabb_world=[world_lo, world_hi]
    )


def on_region(env: TaskEnvironment, spec: CheckSpec) -> CheckResult:
    """Object's bottom rests at the support region's height with its centre over the region."""
    obj = _known(env, spec.object, "object")
    target = _known(env, spec.target, "target")
    z_tol = _param(spec, "z_tolerance_m", 0.005)
    lower, upper = _region(env, target, "support_region")
    local = env.to_entity_frame(target, env.entity_world_points(obj))
    lo, hi = local.min(axis=0), local.max(axis=0)
    centre = (lo[:2] + hi[:2]) / 2
    height = float(lo[2] - lower[2])
    over = bool(np.all(centre >= lower[:2]) and np.all(centre <= upper[:2]))
    ok = over and abs(height) <= z_tol
    detail = (
        ""
        if ok
        else (
            f"{obj!r} is not over the support region of {target!r}"
            if not over
            else f"{obj!r} bottom is {height:.4f} m from the support region of {target!r}"
        )
    )
    return _verdict(spec, ok, detail, height_m=height, centre_local=centre)


def poured_fraction(env: TaskEnvironment, spec: CheckSpec) -> CheckResult:
    """Share of the source's particles whose centre lies in the target's container region.

    Written ``{check: poured_fraction, source: S, target: T, min: 0.8}`` (``source`` is the
    check's object, ``min`` its parameter, default 0.8). The region is taken in the
    target's frame; a particle resting on the floor counts (its centre may sit up to one
    radius below the region's floor when the floor is the region's lower face).
    """
    source = _known(env, spec.object, "source")
    target = _known(env, spec.target, "target")
    needed = _param(spec, "min", 0.8)
    if not 0.0 <= needed <= 1.0:
        raise CheckUnavailable("params.min must lie between 0 and 1")
    held = env.particles.get(source)
    if held is None:
        raise CheckUnavailable(
            f"source {source!r} holds no particles (a pour step must name it and its asset "
            "must declare a container_region)"
        )
    lower, upper = _region(env, target, "container_region")
    local = env.to_entity_frame(target, env.particle_positions(source))
    floor = lower - np.array([0.0, 0.0, held.radius_m])
    inside = int(np.count_nonzero(np.all((local >= floor) & (local <= upper), axis=1)))
    fraction = inside / held.count
    ok = fraction >= needed
    detail = (
        f"{inside} of {held.count} particles ({fraction:.0%}) ended in the container region "
        f"of {target!r}"
    )
    if not ok:
        detail += f"; needs {needed:.0%}"
    return _verdict(
        spec, ok, detail, inside=inside, particles=held.count, fraction=fraction, min=needed
    )


for _name, _fn in (
    ("poured_fraction", poured_fraction),
    ("at_rest", at_rest),
    ("upright", upright),
    ("target_upright", target_upright),
    ("on_table", on_table),
    ("no_penetration", no_penetration),
    ("inside_region", inside_region),
    ("on_region", on_region),
):
    register_check(_name, _fn)


def run_one(env: TaskEnvironment, spec: CheckSpec) -> CheckResult:
    fn = _CHECKS.get(spec.check)
    if fn is None:
        return CheckResult(
            spec.check,
            "unavailable",
            f"unknown check {spec.check!r}; registered: {', '.join(registered_checks())}",
        )
    try:
        outcome = fn(env, spec)
    except CheckUnavailable as error:
        return CheckResult(spec.check, "unavailable", str(error))
    except Exception as error:  # fail closed: a broken check never passes
        return CheckResult(
            spec.check, "unavailable", f"check raised {type(error).__name__}: {error}"
        )
    if isinstance(outcome, bool):
        return CheckResult(spec.check, "passed" if outcome else "failed")
    if not isinstance(outcome, CheckResult):
        return CheckResult(
            spec.check, "unavailable", f"check returned {type(outcome).__name__}, not CheckResult"
        )
    return outcome


def run_checks(env: TaskEnvironment, specs: Sequence[CheckSpec | str]) -> tuple[CheckResult, ...]:
    return tuple(run_one(env, CheckSpec(spec) if isinstance(spec, str) else spec) for spec in specs)
