"""The task a run collects: scene, program, acceptance checks and asset requirements.

``parse_task`` is the only way a task file becomes a ``TaskSpec``: it refuses unknown keys and
wrong types with the dotted path of the offending value, and checks every cross reference
(program and checks name scene entities, roles bind distinct entities) so that nothing
downstream has to. ``task_to_dict`` is its inverse; deployments are written through it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from domain import fields as f
from domain.cameras import CameraSpec, camera_to_dict, parse_cameras
from domain.errors import ConfigError
from domain.paths import contained_relpath
from domain.requirements import RELATION_KINDS, AssetRequirements, parse_requirements

PACKAGE_MANIFEST = "asset.catalog.json"
PRIMITIVE_ARITY: Mapping[str, int] = {"box": 3, "cylinder": 2, "sphere": 1}
ROBOT_KINDS: tuple[str, ...] = ("parallel_gripper", "franka_panda")
# Kinds whose gripper has a fixed, real stroke: ``max_opening_m`` defaults to it and may not
# exceed it. The gantry's opening is whatever the task declares.
FIXED_OPENING_M: Mapping[str, float] = {"franka_panda": 0.08}
# Kinds mounted on the table: the base defaults to the middle of the table's -x edge, set in
# by this much (the footprint of the base), and must lie on the table.
MOUNTED_BASE_INSET_M: Mapping[str, float] = {"franka_panda": 0.1}


@dataclass(frozen=True)
class PrimitiveAsset:
    """A built-in shape: box [x, y, z] full extents; cylinder [radius, height]; sphere [radius]."""

    primitive: str
    size_m: tuple[float, ...]


@dataclass(frozen=True)
class PackageAsset:
    """Path of an ``asset.catalog.json``, relative to the folder of the task file."""

    package: str


@dataclass(frozen=True)
class EntitySpec:
    entity_id: str
    position_m: tuple[float, float]
    yaw_deg: float = 0.0
    asset: PrimitiveAsset | PackageAsset = field(
        default_factory=lambda: PrimitiveAsset("box", (0.04, 0.04, 0.04))
    )


@dataclass(frozen=True)
class TableSpec:
    size_m: tuple[float, float]


@dataclass(frozen=True)
class RobotSpec:
    """Which robot runs the program; a mounted arm also has a base pose on the table."""

    kind: str
    max_opening_m: float
    base_position_m: tuple[float, float] | None = None  # None: not mounted (the gantry)
    base_yaw_deg: float = 0.0


@dataclass(frozen=True)
class PhysicsSpec:
    timestep_s: float = 0.002
    density_kg_m3: float = 500.0
    pose_noise_m: float = 0.005
    pose_noise_yaw_deg: float = 3.0


@dataclass(frozen=True)
class SceneSpec:
    table: TableSpec
    robot: RobotSpec
    entities: tuple[EntitySpec, ...]
    physics: PhysicsSpec = field(default_factory=PhysicsSpec)


@dataclass(frozen=True)
class SkillStep:
    skill: str
    object: str
    target: str | None = None
    relation: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckSpec:
    check: str
    object: str | None = None
    target: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChecksSpec:
    initial: tuple[CheckSpec, ...]
    final: tuple[CheckSpec, ...]


@dataclass(frozen=True)
class TaskSpec:
    task_id: str
    scene: SceneSpec
    program: tuple[SkillStep, ...]
    checks: ChecksSpec
    asset_requirements: AssetRequirements | None = None
    cameras: tuple[CameraSpec, ...] = ()
    instruction: str | None = None

    @property
    def instruction_text(self) -> str:
        """The readable instruction a policy is conditioned on (datasets' task string):
        the task file's ``instruction`` or, when absent, one derived from the program."""
        return self.instruction if self.instruction is not None else program_instruction(
            self.program
        )

    def entity(self, entity_id: str) -> EntitySpec:
        for entity in self.scene.entities:
            if entity.entity_id == entity_id:
                return entity
        raise KeyError(entity_id)

    def role_entities(self) -> dict[str, str]:
        """Role -> entity id, sorted by role (empty when no asset varies)."""
        if self.asset_requirements is None:
            return {}
        roles = self.asset_requirements.roles
        return {role: roles[role].entity_id for role in sorted(roles)}


# --------------------------------------------------------------------------- parsing


def _parse_asset(value: Any, path: str, source: str | None) -> PrimitiveAsset | PackageAsset:
    if isinstance(value, Mapping) and "package" in value:
        raw = f.mapping(value, path, source, required=("package",))
        where = f.key_path(path, "package")
        package = f.text(raw["package"], where, source)
        if package.startswith(("/", "\\", "~")) or "://" in package or package[1:3] == ":\\":
            f.fail(where, "must be a path relative to the task file", source)
        package = contained_relpath(
            package, where=where, root="the task file's folder",
            error=lambda message: ConfigError("", message, source=source),
        )
        if posixpath.basename(package) != PACKAGE_MANIFEST:
            f.fail(where, f"must name a package's {PACKAGE_MANIFEST}", source)
        return PackageAsset(package)
    raw = f.mapping(value, path, source, required=("primitive", "size_m"))
    primitive = f.text(raw["primitive"], f.key_path(path, "primitive"), source)
    if primitive not in PRIMITIVE_ARITY:
        f.fail(
            f.key_path(path, "primitive"),
            f"unknown primitive {primitive!r}; expected one of {', '.join(PRIMITIVE_ARITY)}",
            source,
        )
    size = f.numbers(
        raw["size_m"],
        f.key_path(path, "size_m"),
        source,
        arity=PRIMITIVE_ARITY[primitive],
        positive=True,
    )
    return PrimitiveAsset(primitive, size)


def _parse_entity(value: Any, path: str, source: str | None) -> EntitySpec:
    raw = f.mapping(
        value, path, source, required=("entity_id", "position_m", "asset"), optional=("yaw_deg",)
    )
    x, y = f.numbers(raw["position_m"], f.key_path(path, "position_m"), source, arity=2)
    return EntitySpec(
        entity_id=f.text(raw["entity_id"], f.key_path(path, "entity_id"), source),
        position_m=(x, y),
        yaw_deg=f.number(raw.get("yaw_deg", 0.0), f.key_path(path, "yaw_deg"), source),
        asset=_parse_asset(raw["asset"], f.key_path(path, "asset"), source),
    )


def _parse_physics(value: Any, path: str, source: str | None) -> PhysicsSpec:
    defaults = PhysicsSpec()
    names = ("timestep_s", "density_kg_m3", "pose_noise_m", "pose_noise_yaw_deg")
    raw = f.mapping(value, path, source, optional=names)

    def read(name: str, *, positive: bool) -> float:
        return f.number(
            raw.get(name, getattr(defaults, name)),
            f.key_path(path, name),
            source,
            positive=positive,
            non_negative=True,
        )

    return PhysicsSpec(
        timestep_s=read("timestep_s", positive=True),
        density_kg_m3=read("density_kg_m3", positive=True),
        pose_noise_m=read("pose_noise_m", positive=False),
        pose_noise_yaw_deg=read("pose_noise_yaw_deg", positive=False),
    )


def _parse_scene(value: Any, path: str, source: str | None) -> SceneSpec:
    raw = f.mapping(
        value, path, source, required=("table", "robot", "entities"), optional=("physics",)
    )
    table_path = f.key_path(path, "table")
    table = f.mapping(raw["table"], table_path, source, required=("size_m",))
    tx, ty = f.numbers(
        table["size_m"], f.key_path(table_path, "size_m"), source, arity=2, positive=True
    )
    robot = _parse_robot(raw["robot"], f.key_path(path, "robot"), source, (tx, ty))
    entities_path = f.key_path(path, "entities")
    raw_entities = f.sequence(raw["entities"], entities_path, source)
    if not raw_entities:
        f.fail(entities_path, "at least one entity is required", source)
    entities = tuple(
        _parse_entity(item, f.index_path(entities_path, i), source)
        for i, item in enumerate(raw_entities)
    )
    seen: set[str] = set()
    for i, entity in enumerate(entities):
        if entity.entity_id in seen:
            f.fail(
                f.key_path(f.index_path(entities_path, i), "entity_id"),
                f"duplicate entity id {entity.entity_id!r}",
                source,
            )
        seen.add(entity.entity_id)
    physics = _parse_physics(raw.get("physics", {}), f.key_path(path, "physics"), source)
    return SceneSpec(TableSpec((tx, ty)), robot, entities, physics)


def _parse_robot(
    value: Any, path: str, source: str | None, table_xy: tuple[float, float]
) -> RobotSpec:
    raw = f.mapping(
        value,
        path,
        source,
        required=("kind",),
        optional=("max_opening_m", "base_position_m", "base_yaw_deg"),
    )
    kind = f.text(raw["kind"], f.key_path(path, "kind"), source)
    if kind not in ROBOT_KINDS:
        f.fail(
            f.key_path(path, "kind"),
            f"unknown robot kind {kind!r}; expected one of {', '.join(ROBOT_KINDS)}",
            source,
        )
    opening_path = f.key_path(path, "max_opening_m")
    fixed = FIXED_OPENING_M.get(kind)
    if "max_opening_m" in raw:
        opening = f.number(raw["max_opening_m"], opening_path, source, positive=True)
        if fixed is not None and opening > fixed:
            f.fail(opening_path, f"the {kind} gripper opens at most {fixed} m", source)
    elif fixed is None:
        f.fail(opening_path, f"required for robot kind {kind!r}", source)
    else:
        opening = fixed
    inset = MOUNTED_BASE_INSET_M.get(kind)
    if inset is None:
        for key in ("base_position_m", "base_yaw_deg"):
            if key in raw:
                f.fail(f.key_path(path, key), f"robot kind {kind!r} has no base", source)
        return RobotSpec(kind, opening)
    base_path = f.key_path(path, "base_position_m")
    if "base_position_m" in raw:
        bx, by = f.numbers(raw["base_position_m"], base_path, source, arity=2)
    else:
        bx, by = round(-table_xy[0] / 2 + inset, 9), 0.0  # no float noise in deployments
    if abs(bx) > table_xy[0] / 2 or abs(by) > table_xy[1] / 2:
        f.fail(
            base_path,
            f"robot base ({bx}, {by}) is outside the table "
            f"({table_xy[0]} x {table_xy[1]} m centred at the origin)",
            source,
        )
    yaw = f.number(raw.get("base_yaw_deg", 0.0), f.key_path(path, "base_yaw_deg"), source)
    return RobotSpec(kind, opening, (bx, by), yaw)


def _entity_ref(value: Any, path: str, source: str | None, entities: set[str]) -> str:
    name = f.text(value, path, source)
    if name not in entities:
        f.fail(path, f"unknown entity {name!r}", source)
    return name


def _optional_entity_ref(
    raw: Mapping[str, Any], key: str, path: str, source: str | None, entities: set[str]
) -> str | None:
    """``raw[key]`` as an entity reference; absent and null both mean "none"."""
    value = raw.get(key)
    if value is None:
        return None
    return _entity_ref(value, f.key_path(path, key), source, entities)


def _params(raw: Mapping[str, Any], path: str, source: str | None) -> dict[str, Any]:
    params_path = f.key_path(path, "params")
    return f.json_value(
        f.string_keyed(raw.get("params", {}), params_path, source), params_path, source
    )


def _parse_step(value: Any, path: str, source: str | None, entities: set[str]) -> SkillStep:
    raw = f.mapping(
        value,
        path,
        source,
        required=("skill", "object"),
        optional=("target", "relation", "params"),
    )
    relation = f.optional_text(raw.get("relation"), f.key_path(path, "relation"), source)
    if relation is not None and relation not in RELATION_KINDS:
        f.fail(
            f.key_path(path, "relation"),
            f"unknown relation {relation!r}; expected one of {', '.join(RELATION_KINDS)}",
            source,
        )
    return SkillStep(
        skill=f.text(raw["skill"], f.key_path(path, "skill"), source),
        object=_entity_ref(raw["object"], f.key_path(path, "object"), source, entities),
        target=_optional_entity_ref(raw, "target", path, source, entities),
        relation=relation,
        params=_params(raw, path, source),
    )


def _parse_check(value: Any, path: str, source: str | None, entities: set[str]) -> CheckSpec:
    if isinstance(value, str):
        return CheckSpec(f.text(value, path, source))
    raw = f.mapping(
        value,
        path,
        source,
        required=("check",),
        optional=("object", "source", "target", "params", "min"),
    )
    # ``source`` names the object a pour check measures from and ``min`` its threshold
    # (``{check: poured_fraction, source: bottle, target: cup, min: 0.8}``): spelled as the
    # object and a parameter, so every check keeps one shape.
    if "source" in raw and "object" in raw:
        f.fail(f.key_path(path, "source"), "give either object or source, not both", source)
    key = "source" if "source" in raw else "object"
    obj = _optional_entity_ref(raw, key, path, source, entities)
    target = _optional_entity_ref(raw, "target", path, source, entities)
    params = _params(raw, path, source)
    if "min" in raw:
        if "min" in params:
            f.fail(f.key_path(path, "min"), "give either min or params.min, not both", source)
        params["min"] = f.json_value(raw["min"], f.key_path(path, "min"), source)
    return CheckSpec(
        check=f.text(raw["check"], f.key_path(path, "check"), source),
        object=obj,
        target=target,
        params=params,
    )


def _parse_check_list(
    value: Any, path: str, source: str | None, entities: set[str]
) -> tuple[CheckSpec, ...]:
    items = f.sequence(value, path, source)
    if not items:
        f.fail(path, "at least one check is required (acceptance fails closed)", source)
    return tuple(
        _parse_check(item, f.index_path(path, i), source, entities) for i, item in enumerate(items)
    )


def parse_task(mapping: Any, source: str | None = None) -> TaskSpec:
    """Validate a task mapping (as loaded from YAML) into a ``TaskSpec``.

    Raises ``ConfigError`` naming ``source`` and the dotted path of the first invalid value.
    """
    raw = f.mapping(
        mapping,
        "",
        source,
        required=("task_id", "scene", "program", "checks"),
        optional=("asset_requirements", "cameras", "instruction"),
    )
    task_id = f.text(raw["task_id"], "task_id", source)
    instruction = None
    if raw.get("instruction") is not None:
        instruction = f.text(raw["instruction"], "instruction", source)
    scene = _parse_scene(raw["scene"], "scene", source)
    entities = {entity.entity_id for entity in scene.entities}
    raw_program = f.sequence(raw["program"], "program", source)
    if not raw_program:
        f.fail("program", "at least one skill step is required", source)
    program = tuple(
        _parse_step(item, f.index_path("program", i), source, entities)
        for i, item in enumerate(raw_program)
    )
    raw_checks = f.mapping(raw["checks"], "checks", source, required=("initial", "final"))
    checks = ChecksSpec(
        initial=_parse_check_list(raw_checks["initial"], "checks.initial", source, entities),
        final=_parse_check_list(raw_checks["final"], "checks.final", source, entities),
    )
    requirements = None
    if raw.get("asset_requirements") is not None:
        requirements = parse_requirements(raw["asset_requirements"], source)
        for role in sorted(requirements.roles):
            entity_id = requirements.roles[role].entity_id
            if entity_id not in entities:
                f.fail(
                    f"asset_requirements.roles.{role}.entity_id",
                    f"unknown entity {entity_id!r}",
                    source,
                )
    cameras = parse_cameras(raw.get("cameras", []), "cameras", source)
    return TaskSpec(task_id, scene, program, checks, requirements, cameras, instruction)


_RELATION_WORDS = {"fits_inside": "in", "supported_by": "on", "pours_into": "into"}


def program_instruction(program: tuple[SkillStep, ...]) -> str:
    """A readable default instruction, e.g. "Pick up the item, then place the item in the bin."."""
    phrases = []
    for step in program:
        obj = step.object.replace("_", " ")
        if step.skill == "pick":
            phrases.append(f"pick up the {obj}")
        elif step.target is not None:
            word = _RELATION_WORDS.get(step.relation or "", "at")
            phrases.append(f"{step.skill.replace('_', ' ')} the {obj} {word} the "
                           f"{step.target.replace('_', ' ')}")
        else:
            phrases.append(f"{step.skill.replace('_', ' ')} the {obj}")
    text = ", then ".join(phrases)
    return text[:1].upper() + text[1:] + "."


# --------------------------------------------------------------------------- serializing


def _asset_to_dict(asset: PrimitiveAsset | PackageAsset) -> dict[str, Any]:
    if isinstance(asset, PackageAsset):
        return {"package": asset.package}
    return {"primitive": asset.primitive, "size_m": list(asset.size_m)}


def _step_to_dict(step: SkillStep) -> dict[str, Any]:
    out: dict[str, Any] = {"skill": step.skill, "object": step.object}
    if step.target is not None:
        out["target"] = step.target
    if step.relation is not None:
        out["relation"] = step.relation
    if step.params:
        out["params"] = dict(step.params)
    return out


def _check_to_value(check: CheckSpec) -> str | dict[str, Any]:
    if check.object is None and check.target is None and not check.params:
        return check.check
    out: dict[str, Any] = {"check": check.check}
    if check.object is not None:
        out["object"] = check.object
    if check.target is not None:
        out["target"] = check.target
    if check.params:
        out["params"] = dict(check.params)
    return out


def _robot_to_dict(robot: RobotSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": robot.kind, "max_opening_m": robot.max_opening_m}
    if robot.base_position_m is not None:
        out["base_position_m"] = list(robot.base_position_m)
        out["base_yaw_deg"] = robot.base_yaw_deg
    return out


def task_to_dict(spec: TaskSpec) -> dict[str, Any]:
    """The task-file mapping of ``spec``; ``parse_task(task_to_dict(s)) == s``."""
    scene = spec.scene
    out: dict[str, Any] = {
        "task_id": spec.task_id,
        "scene": {
            "table": {"size_m": list(scene.table.size_m)},
            "robot": _robot_to_dict(scene.robot),
            "physics": {
                "timestep_s": scene.physics.timestep_s,
                "density_kg_m3": scene.physics.density_kg_m3,
                "pose_noise_m": scene.physics.pose_noise_m,
                "pose_noise_yaw_deg": scene.physics.pose_noise_yaw_deg,
            },
            "entities": [
                {
                    "entity_id": entity.entity_id,
                    "position_m": list(entity.position_m),
                    "yaw_deg": entity.yaw_deg,
                    "asset": _asset_to_dict(entity.asset),
                }
                for entity in scene.entities
            ],
        },
        "program": [_step_to_dict(step) for step in spec.program],
        "checks": {
            "initial": [_check_to_value(check) for check in spec.checks.initial],
            "final": [_check_to_value(check) for check in spec.checks.final],
        },
    }
    if spec.asset_requirements is not None:
        requirements = spec.asset_requirements.to_dict()
        for role in requirements["roles"].values():
            if role["max_extent_m"] is None:
                del role["max_extent_m"]
            if role["query"]["category"] is None:
                del role["query"]["category"]
        out["asset_requirements"] = requirements
    if spec.cameras:
        out["cameras"] = [camera_to_dict(camera) for camera in spec.cameras]
    if spec.instruction is not None:
        out["instruction"] = spec.instruction
    return out
