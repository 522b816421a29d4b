"""Program skills (pick, place, pour) and the registry users extend with their own.

A skill is ``fn(env, step, recorder) -> SkillResult | bool``. Skills never raise for
an impossible request (an object wider than the gripper, a target without a region, a
pose the arm cannot reach): they return a failed result whose ``detail`` says why, so the
episode is rejected instead of crashing the collection. A skill that raises anyway is
reported failed.

Skills speak only in Cartesian TCP waypoints (pre-grasp, grasp, lift, carry, pre-place,
release, retreat) through ``env.move_tcp``; which robot turns them into joint targets
(and how) is the robot's business. Grasp and release are verified physically: ``pick``
needs the object between (touching) both fingers after the lift, ``place`` needs it free
of every finger after opening.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from domain.task import SkillStep
from runtime.sim.results import ProgramResult, SkillResult
from runtime.sim.robots import Unreachable
from runtime.sim.robots.base import rotation_x, rotation_z

if TYPE_CHECKING:
    from runtime.sim.environment import TaskEnvironment
    from runtime.sim.recorder import TrajectoryRecorder

SkillFn = Callable[["TaskEnvironment", SkillStep, "TrajectoryRecorder | None"], Any]

_SKILLS: dict[str, SkillFn] = {}

GRASP_MARGIN_M = 0.004  # free space each side of the object when the fingers approach
APPROACH_CLEARANCE_M = 0.04
LIFT_HEIGHT_M = 0.10
RELEASE_GAP_M = 0.004
RELEASE_OPENING_M = 0.002  # extra opening per finger when letting go of a held object
DEFAULT_POUR_TILT_DEG = 120.0
POUR_LIP_M = 0.015  # the tilted source's lowest point stays this far above the target's top
POUR_STEP_RAD = math.radians(10.0)
POUR_SPILL_RAD = math.radians(80.0)  # below this tilt nothing runs out of an upright source
POUR_MIN_TILT_RAD = math.radians(100.0)  # the least tilt that counts as pouring
POUR_MAX_EXTRA_INTERVALS = 60  # longest wait for particles to run out, after hold_intervals
# Past POUR_SPILL_RAD the source turns this slowly, so what runs out trickles from the mouth
# instead of being flung: at 1 rad/s the Panda's 10 mm bottle threw a third of its grains
# past the 50 mm cup's rim (accepted for 0 of 7 seeds), at 6 deg/s 92-100 % landed.
DEFAULT_POUR_FLOW_DEG_S = 6.0


def register_skill(name: str, fn: SkillFn) -> None:
    """Make ``fn`` usable as ``{skill: name}`` in task programs (replaces an existing name)."""
    if not isinstance(name, str) or not name:
        raise ValueError("skill name must be a non-empty string")
    if not callable(fn):
        raise TypeError(f"skill {name!r} must be callable")
    _SKILLS[name] = fn


def registered_skills() -> tuple[str, ...]:
    return tuple(sorted(_SKILLS))


def _half_turn(angle: float) -> float:
    """Wrap to (-pi/2, pi/2]: a parallel gripper is symmetric under a half turn."""
    return angle - math.pi * math.ceil((angle - math.pi / 2) / math.pi)


def _fail(step: SkillStep, detail: str) -> SkillResult:
    return SkillResult(step.skill, step.object, False, detail)


def _done(step: SkillStep, detail: str = "") -> SkillResult:
    return SkillResult(step.skill, step.object, True, detail)


def pick(env: TaskEnvironment, step: SkillStep, recorder: TrajectoryRecorder | None) -> SkillResult:
    """Top-down antipodal grasp across the object's narrower horizontal side, then lift."""
    eid = step.object
    geometry = env.geometries[eid]
    pos, rot = env.entity_pose(eid)
    lower, upper = geometry.local_lower, geometry.local_upper
    extents = upper - lower
    axis = 0 if extents[0] <= extents[1] else 1
    width = float(extents[axis])
    opening = env.robot.max_opening_m
    if width + 2 * GRASP_MARGIN_M > opening:
        return _fail(
            step,
            f"object {eid!r} is {width:.3f} m wide across its narrowest horizontal side; "
            f"the gripper opens {opening:.3f} m (needs {2 * GRASP_MARGIN_M:.3f} m margin)",
        )
    closing_axis = rot[:, axis]
    yaw = env.robot.grasp_yaw(
        _half_turn(math.atan2(closing_axis[1], closing_axis[0]) - math.pi / 2)
    )
    centre = env.to_world(eid, (lower + upper) / 2)
    world_lo, world_hi = env.entity_world_aabb(eid)
    bottom, top = float(world_lo[2]), float(world_hi[2])
    grasp_z = max(bottom + 0.005, top - 0.8 * env.robot.finger_length_m)
    try:
        env.set_fingers(recorder, opening / 2, intervals=3)
        env.move_tcp(recorder, z=max(env.tcp()[2], top + APPROACH_CLEARANCE_M), waypoint="clear")
        env.move_tcp(
            recorder, x=centre[0], y=centre[1], yaw=yaw, tilt=0.0, waypoint="pre-grasp"
        )
        env.move_tcp(recorder, z=grasp_z, speed_m_s=0.2, waypoint="grasp")
        env.set_fingers(recorder, -0.01, intervals=15)
        if env.finger_width() < 0.25 * width:
            return _fail(
                step, f"grasp of {eid!r} missed: the fingers closed to {env.finger_width():.4f} m"
            )
        env.move_tcp(recorder, z=top + LIFT_HEIGHT_M, speed_m_s=0.2, waypoint="lift")
    except Unreachable as error:
        return _fail(step, str(error))
    rise = float(env.entity_world_aabb(eid)[0][2]) - bottom
    if rise < 0.5 * LIFT_HEIGHT_M:
        return _fail(step, f"object {eid!r} slipped: lifted {rise:.3f} m of {LIFT_HEIGHT_M:.3f} m")
    left, right = env.finger_contacts(eid)
    if not (left and right):
        return _fail(step, f"object {eid!r} is not between the fingers after the lift")
    env.held = eid
    env.picked_from[eid] = (float(centre[0]), float(centre[1]), bottom)
    return _done(step, f"grasped across {width:.3f} m")


def _region_for(env: TaskEnvironment, step: SkillStep) -> tuple[str, np.ndarray, np.ndarray] | str:
    target = step.target
    if target is None:
        return f"skill {step.skill!r} needs a target"
    geometry = env.geometries[target]
    if step.relation == "supported_by":
        names = ("support_region",)
    elif step.relation in ("fits_inside", "pours_into"):
        names = ("container_region",)
    else:
        names = ("container_region", "support_region")
    for name in names:
        region = geometry.region(name)
        if region is not None:
            return (name, region[0], region[1])
    return f"target {target!r} declares no {' or '.join(names)}"


def _align_held(env: TaskEnvironment, recorder: TrajectoryRecorder | None, target: str) -> None:
    """Turn the wrist so the held object's axes line up with the target's axes."""
    _, obj_rot = env.entity_pose(env.held or "")
    _, target_rot = env.entity_pose(target)
    delta = _half_turn(
        math.atan2(target_rot[1, 0], target_rot[0, 0]) - math.atan2(obj_rot[1, 0], obj_rot[0, 0])
    )
    env.move_tcp(recorder, yaw=float(env.arm_targets()[3] + delta), waypoint="carry")


def _carry_over(
    env: TaskEnvironment,
    recorder: TrajectoryRecorder | None,
    point_world: np.ndarray,
    bottom_z: float,
    *,
    clear_z: float,
    align_to: str | None,
) -> None:
    """Carry the held object so its bottom centre is above ``point_world`` at ``bottom_z``.

    The object travels with its bottom above ``clear_z`` + the approach clearance, and turns
    to line up with ``align_to``'s axes when given.
    """
    held = env.held or ""
    lo, _ = env.entity_world_aabb(held)
    offset_z = float(lo[2]) - float(env.tcp()[2])
    travel = max(float(env.tcp()[2]), clear_z + APPROACH_CLEARANCE_M - offset_z)
    env.move_tcp(recorder, z=travel, waypoint="carry")
    if align_to is not None:
        _align_held(env, recorder, align_to)
    lo, hi = env.entity_world_aabb(held)
    offset_xy = (lo[:2] + hi[:2]) / 2 - env.tcp()[:2]
    env.move_tcp(
        recorder,
        x=point_world[0] - offset_xy[0],
        y=point_world[1] - offset_xy[1],
        waypoint="pre-place",
    )
    env.move_tcp(recorder, z=bottom_z - offset_z, speed_m_s=0.15, waypoint="release")


def _release(env: TaskEnvironment, recorder: TrajectoryRecorder | None) -> str | None:
    """Open the fingers just clear of the object, forget it and back the gripper away upwards.

    Opening only a little (not to the full stroke) is what a real pick-and-place
    does inside a container: fully open fingers would press against the walls and could
    lift the container along with the gripper.
    """
    held = env.held or ""
    half = min(env.robot.max_opening_m / 2, env.finger_width() / 2 + RELEASE_OPENING_M)
    env.set_fingers(recorder, half, intervals=15)
    env.held = None
    env.move_tcp(recorder, z=float(env.tcp()[2]) + LIFT_HEIGHT_M, waypoint="retreat")
    left, right = env.finger_contacts(held)
    if left or right:
        return f"object {held!r} is still in contact with a finger after opening"
    return None


def place(
    env: TaskEnvironment, step: SkillStep, recorder: TrajectoryRecorder | None
) -> SkillResult:
    """Lower the held object onto the target's container floor or support region and let go."""
    if env.held != step.object:
        return _fail(step, f"object {step.object!r} is not held (pick it first)")
    found = _region_for(env, step)
    if isinstance(found, str):
        return _fail(step, found)
    name, lower, upper = found
    target = step.target or ""
    centre = np.array([(lower[0] + upper[0]) / 2, (lower[1] + upper[1]) / 2, lower[2]])
    point = env.to_world(target, centre)
    target_top = float(env.entity_world_aabb(target)[1][2])
    try:
        _carry_over(
            env,
            recorder,
            point,
            float(point[2]) + RELEASE_GAP_M,
            clear_z=target_top,
            align_to=target,
        )
        stuck = _release(env, recorder)
    except Unreachable as error:
        return _fail(step, str(error))
    if stuck is not None:
        return _fail(step, stuck)
    env.hold(recorder, intervals=10)
    return _done(step, f"released onto {target!r} {name}")


def _mouth_local(env: TaskEnvironment, entity_id: str) -> np.ndarray:
    """Where the source pours from, in its frame: the top centre of its cavity or bounds."""
    geometry = env.geometries[entity_id]
    region = geometry.region("container_region")
    lower, upper = region if region is not None else (geometry.local_lower, geometry.local_upper)
    return np.array([(lower[0] + upper[0]) / 2, (lower[1] + upper[1]) / 2, upper[2]])


def _tilt_rotation(yaw: float, angle: float) -> np.ndarray:
    """World rotation of the held object when the wrist tilts by ``angle`` at ``yaw``."""
    return rotation_z(yaw) @ rotation_x(angle) @ rotation_z(yaw).T


def _pour_path(
    env: TaskEnvironment,
    source: str,
    target: str,
    aperture: np.ndarray,
    target_top: float,
    tilt: float,
) -> list[tuple[float, float, float, float]]:
    """TCP poses (x, y, z, tilt) that turn the source about its mouth above the aperture.

    At every step the mouth stays over the aperture's centre. Until the source is nearly
    level (``POUR_SPILL_RAD``) it turns at the travel height; from there on it is as low as
    the tilted source and gripper allow: what is over the target keeps ``POUR_LIP_M`` above
    its top, the rest above the table, so nothing strikes the target and the particles fall
    a short way.
    """
    target_lo, target_hi = (corner[:2] for corner in env.entity_world_aabb(target))
    start = env.arm_targets()
    yaw, tilt0 = float(start[3]), float(start[4])
    mouth = env.to_world(source, _mouth_local(env, source))
    from_tcp = mouth - env.tcp()[:3]
    geometry = env.geometries[source]
    steps = np.linspace(0.0, 1.0, 6)
    grid = np.array([[x, y, z] for x in steps for y in steps for z in steps])
    body = env.to_world(
        source, geometry.local_lower + grid * (geometry.local_upper - geometry.local_lower)
    )
    around_mouth = np.concatenate([body, env.gripper_points()]) - mouth
    steps = max(1, math.ceil(abs(tilt) / POUR_STEP_RAD))
    poses = []
    mouth_xy = aperture[:2]
    for k in range(steps + 1):
        angle = tilt * k / steps
        turned = around_mouth @ _tilt_rotation(yaw, angle).T
        xy = turned[:, :2] + mouth_xy
        over = np.all((xy >= target_lo - POUR_LIP_M) & (xy <= target_hi + POUR_LIP_M), axis=1)
        # Over the target, clear its top; elsewhere, clear the table.
        height = POUR_LIP_M - float(np.min(turned[:, 2]))
        if np.any(over):
            height = max(height, target_top + POUR_LIP_M - float(np.min(turned[over, 2])))
        if abs(angle) < POUR_SPILL_RAD:
            # Nothing runs out yet: turn up at the travel height, where the gripper cannot
            # sweep through the target, and come down once the source is nearly level.
            height = max(height, float(mouth[2]))
        rotation = _tilt_rotation(yaw, angle)
        mouth_at = np.array([mouth_xy[0], mouth_xy[1], height])
        tcp = mouth_at - rotation @ from_tcp
        poses.append((float(tcp[0]), float(tcp[1]), float(tcp[2]), tilt0 + angle))
    return poses


def _reachable(env: TaskEnvironment, path: list[tuple[float, float, float, float]]) -> bool:
    return all(env.can_reach(x=x, y=y, z=z, tilt=angle) for x, y, z, angle in path)


def _still_inside(env: TaskEnvironment, source: str) -> int:
    """How many of the source's particles are still in its cavity."""
    held = env.particles.get(source)
    region = env.geometries[source].region("container_region")
    if held is None or region is None:
        return 0
    local = env.to_entity_frame(source, env.particle_positions(source))
    margin = held.radius_m
    inside = np.all((local >= region[0] - margin) & (local <= region[1] + margin), axis=1)
    return int(np.count_nonzero(inside))


def _hold_while_pouring(
    env: TaskEnvironment, recorder: TrajectoryRecorder | None, source: str, intervals: int
) -> int:
    """Hold the tilt ``intervals`` control intervals, longer (bounded) while particles are
    still running out; returns how many stayed in the source."""
    env.hold(recorder, intervals=intervals)
    for _ in range(POUR_MAX_EXTRA_INTERVALS):
        if _still_inside(env, source) == 0:
            break
        env.step_control(recorder)
    return _still_inside(env, source)


def pour(env: TaskEnvironment, step: SkillStep, recorder: TrajectoryRecorder | None) -> SkillResult:
    """Carry the held source over the target, turn it about its mouth, tilt back, set it down.

    The wrist tilts in steps while the mouth stays above the target's aperture (see
    :func:`_pour_path`), past the spill angle slowly (``params.flow_speed_deg_s``, default
    6) so the stream trickles rather than being thrown; a source filled with particles
    (:mod:`runtime.sim.particles`) is held tilted until they have run out (bounded), and
    where they landed is for the ``poured_fraction`` check to judge. Like a person pouring,
    the robot then puts the source back where it was picked up (``params.put_back``,
    default true) so the program ends with the scene at rest; ``put_back: false`` keeps
    holding it for a following skill.
    """
    if env.held != step.object:
        return _fail(step, f"object {step.object!r} is not held (pick it first)")
    found = _region_for(env, dataclasses.replace(step, relation="pours_into"))
    if isinstance(found, str):
        return _fail(step, found)
    put_back = step.params.get("put_back", True)
    if not isinstance(put_back, bool):
        return _fail(step, "params.put_back must be true or false")
    flow_speed = step.params.get("flow_speed_deg_s", DEFAULT_POUR_FLOW_DEG_S)
    if isinstance(flow_speed, bool) or not isinstance(flow_speed, int | float) or not (
        0 < flow_speed <= 180
    ):
        return _fail(step, "params.flow_speed_deg_s must be a number in (0, 180]")
    _, lower, upper = found
    source, target = step.object, step.target or ""
    aperture = env.to_world(
        target, np.array([(lower[0] + upper[0]) / 2, (lower[1] + upper[1]) / 2, upper[2]])
    )
    target_top = float(env.entity_world_aabb(target)[1][2])
    tilt = math.radians(float(step.params.get("tilt_deg", DEFAULT_POUR_TILT_DEG)))
    try:
        bottom_offset = float(env.entity_world_aabb(source)[0][2]) - float(env.tcp()[2])
        travel = max(float(env.tcp()[2]), target_top + APPROACH_CLEARANCE_M - bottom_offset)
        env.move_tcp(recorder, z=travel, waypoint="carry")
        path = _pour_path(env, source, target, aperture, target_top, tilt)
        # Pouring works either way round; an arm may only reach one of them.
        if not _reachable(env, path):
            other = _pour_path(env, source, target, aperture, target_top, -tilt)
            if _reachable(env, other):
                path, tilt = other, -tilt
        x, y, z, _ = path[0]
        env.move_tcp(recorder, x=x, y=y, waypoint="pre-pour")
        env.move_tcp(recorder, z=z, speed_m_s=0.15, waypoint="pre-pour")
        reached = 0
        for index, (x, y, z, angle) in enumerate(path[1:], start=1):
            try:
                flowing = abs(angle - path[0][3]) > POUR_SPILL_RAD
                env.move_tcp(
                    recorder, x=x, y=y, z=z, tilt=angle,
                    speed_rad_s=math.radians(flow_speed) if flowing else 1.0, waypoint="pour",
                )
            except Unreachable:
                # Past POUR_MIN_TILT the source pours; an arm that cannot turn it further
                # (joint limits, its own links) pours from the last pose it reached.
                if abs(path[reached][3] - path[0][3]) < POUR_MIN_TILT_RAD:
                    raise
                break
            reached = index
        tilt = path[reached][3] - path[0][3]
        left = _hold_while_pouring(
            env, recorder, source, int(step.params.get("hold_intervals", 15))
        )
        for x, y, z, angle in reversed(path[:reached]):
            env.move_tcp(
                recorder, x=x, y=y, z=z, tilt=angle, speed_rad_s=1.0,
                waypoint="upright",
            )
    except Unreachable as error:
        return _fail(step, str(error))
    if env.finger_width() < 0.002:
        env.held = None
        return _fail(step, f"object {step.object!r} dropped while pouring")
    poured = f"poured over {target!r} at {math.degrees(tilt):.0f} deg"
    if source in env.particles:
        count = env.particles[source].count
        poured += f" ({count - left} of {count} particles out)"
    origin = env.picked_from.get(step.object)
    if not put_back or origin is None:
        return _done(step, poured)
    x, y, bottom = origin
    try:
        _carry_over(
            env,
            recorder,
            np.array([x, y]),
            bottom + RELEASE_GAP_M,
            clear_z=target_top,
            align_to=None,
        )
        stuck = _release(env, recorder)
    except Unreachable as error:
        return _fail(step, str(error))
    if stuck is not None:
        return _fail(step, stuck)
    return _done(step, f"{poured}; put back at ({x:.3f}, {y:.3f})")


for _name, _fn in (("pick", pick), ("place", place), ("pour", pour)):
    register_skill(_name, _fn)


def run_program(env: TaskEnvironment, recorder: TrajectoryRecorder | None) -> ProgramResult:
    """Run the task program in order; stop at the first skill that does not complete."""
    if recorder is not None:
        recorder.begin(env.observation())
    results: list[SkillResult] = []
    program = env.task.program
    for step in program:
        # Every completed skill ends with a bounded settle (see environment.settle), so the
        # final checks judge the scene the program left, not the tail of an arm motion.
        before = env.program_steps
        fn = _SKILLS.get(step.skill)
        if fn is None:
            result = _fail(
                step, f"unknown skill {step.skill!r}; registered: {', '.join(registered_skills())}"
            )
        else:
            try:
                outcome = fn(env, step, recorder)
            except Exception as error:  # a user skill must not take the collection down
                outcome = _fail(step, f"skill raised {type(error).__name__}: {error}")
            if isinstance(outcome, bool):
                outcome = SkillResult(step.skill, step.object, outcome)
            if not isinstance(outcome, SkillResult):
                outcome = _fail(step, f"skill returned {type(outcome).__name__}, not SkillResult")
            result = outcome
        if result.completed and not env.settle(recorder):
            linear, angular = env.motion()
            unsettled = f"not settled: {linear:.4f} m/s, {angular:.3f} rad/s"
            detail = f"{result.detail}; {unsettled}" if result.detail else unsettled
            result = dataclasses.replace(result, detail=detail)
        results.append(dataclasses.replace(result, steps=env.program_steps - before))
        if not result.completed:
            break
    completed = len(results) == len(program) and all(r.completed for r in results)
    detail = ""
    if not completed and results:
        last = results[-1]
        detail = f"step {len(results) - 1} ({last.skill} {last.object}): {last.detail}"
    return ProgramResult(completed, tuple(results), env.program_steps, detail)
