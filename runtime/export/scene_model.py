"""The compiled scene of a deployment as MJCF text (robomimic's per-demo ``model_file``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=64)
def deployment_mjcf(deployment_path: Path) -> str:
    """Build the deployment's MuJoCo scene once and serialize it; meshes are inlined by the
    scene builder, so the text stands alone."""
    from runtime.sim import TaskEnvironment

    env = TaskEnvironment.from_deployment(deployment_path)
    try:
        return str(env.spec.to_xml())
    finally:
        env.close()
