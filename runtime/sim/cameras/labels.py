"""Segmentation labels: which entity of the task each geom of the compiled model belongs to.

The label ids are stable across robots and asset sets, so a policy or a dataset can rely on
them: 0 is background (nothing hit), 1 the table, 2 the robot (every geom of a body that is
neither the world nor a scene entity, whatever the robot is), then one id per scene entity
in task order, then 3 + len(entities) for any other geom fixed to the world.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

BACKGROUND, TABLE, ROBOT = "background", "table", "robot"
WORLD = "world"
TABLE_GEOM = "table"


def entity_label(entity_id: str) -> str:
    return f"entity:{entity_id}"


@dataclass(frozen=True)
class SegmentationLabels:
    """``names[i]`` is label ``i``; ``geom_label[g]`` is the label of geom ``g``."""

    names: tuple[str, ...]
    geom_label: np.ndarray  # (ngeom,) int

    @property
    def dtype(self) -> type[np.unsignedinteger]:
        return np.uint8 if len(self.names) <= 256 else np.uint16

    def to_dict(self) -> dict[str, str]:
        """JSON form: label id (as a string key) -> entity name."""
        return {str(i): name for i, name in enumerate(self.names)}


def label_names(entity_ids: Sequence[str]) -> tuple[str, ...]:
    return (BACKGROUND, TABLE, ROBOT, *(entity_label(e) for e in entity_ids), WORLD)


def _particle_owner(body_name: str, entity_ids: Sequence[str]) -> str | None:
    """The entity whose particles (``runtime.sim.scene.particle_body_name``) a body is."""
    for entity_id in entity_ids:
        if body_name.startswith(f"entity_{entity_id}_particle_"):
            return entity_id
    return None


def segmentation_labels(
    model: mujoco.MjModel, entity_ids: Sequence[str], entity_body: dict[str, int]
) -> SegmentationLabels:
    """Label every geom of ``model``; ``entity_body`` maps entity id -> its body id."""
    names = label_names(entity_ids)
    index = {name: i for i, name in enumerate(names)}
    body_label = {body: index[entity_label(e)] for e, body in entity_body.items()}
    labels = np.empty(model.ngeom, dtype=np.int64)
    for geom in range(model.ngeom):
        body = int(model.geom_bodyid[geom])
        # An entity's geoms may sit on child bodies (an articulated asset): walk up to a
        # body that is an entity, or to the world.
        root = body
        while root != 0 and root not in body_label:
            root = int(model.body_parentid[root])
        owner = _particle_owner(model.body(body).name, entity_ids)
        if owner is not None:  # a pour source's particles are part of what it holds
            labels[geom] = index[entity_label(owner)]
        elif root in body_label:
            labels[geom] = body_label[root]
        elif model.geom(geom).name == TABLE_GEOM:
            labels[geom] = index[TABLE]
        elif body == 0:
            labels[geom] = index[WORLD]
        else:
            labels[geom] = index[ROBOT]
    return SegmentationLabels(names, labels)
