"""The compiled scene of a deployment, for robomimic: MJCF text (the per-demo ``model_file``
robomimic expects) and MuJoCo's binary model (MJB), the exact model the episodes ran in.

Why both: ``MjSpec.to_xml`` writes numbers with limited precision (joint ranges, actuator
gains, mesh-derived masses come back a few ulps off), so a model rebuilt from the text is close
but not the same, and a replay of the exported states drifts; the MJB holds every number as
compiled, so set-state-and-step replays bit for bit. The text also lacks the explicit inertials
the scene builder sets on bodies without geometry (MuJoCo's writer leaves them out, and the
text would not compile); they are written back with full precision.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SceneModel:
    mjcf: str
    mjb: bytes


def _numbers(values: Any) -> str:
    return " ".join(repr(float(v)) for v in np.asarray(values, dtype=np.float64).reshape(-1))


def _with_explicit_inertials(spec: Any, text: str) -> str:
    root = ElementTree.fromstring(text)
    bodies = {body.name: body for body in spec.bodies}
    for element in root.iter("body"):
        body = bodies.get(element.get("name"))
        if body is None or not body.explicitinertial or element.find("inertial") is not None:
            continue
        inertial = ElementTree.Element("inertial", {
            "pos": _numbers(body.ipos),
            "quat": _numbers(body.iquat),
            "mass": repr(float(body.mass)),
            "diaginertia": _numbers(body.inertia),
        })
        element.insert(0, inertial)
    return ElementTree.tostring(root, encoding="unicode") + "\n"


def _mjb(model: Any) -> bytes:
    import mujoco

    buffer = np.zeros(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buffer)
    return buffer.tobytes()


@lru_cache(maxsize=64)
def deployment_model(deployment_path: Path) -> SceneModel:
    """Build the deployment's MuJoCo scene once; meshes are inlined by the scene builder, so
    the text stands alone."""
    from runtime.sim import TaskEnvironment

    env = TaskEnvironment.from_deployment(deployment_path)
    try:
        return SceneModel(_with_explicit_inertials(env.spec, str(env.spec.to_xml())),
                          _mjb(env.model))
    finally:
        env.close()
