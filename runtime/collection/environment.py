"""How a worker gets its ONE simulator environment (the MuJoCo one unless a caller says)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

EnvironmentFactory = Callable[..., Any]
"""``factory(deployment_dir, *, seed, settle_steps) -> environment``. The environment must
provide ``reset(seed: int | None)`` (an int: the episode's deterministic start; None: return
to the nominal state after an episode, no noise, no settling), ``replace_assets(deployment_dir)``
returning an object with ``roles_replaced`` and ``entities_kept``, ``run_checks(specs)``,
``run_program(recorder)`` and ``close()``; ``constructions`` is optional."""


def default_environment_factory(deployment_dir: Path, *, seed: int, settle_steps: int) -> Any:
    """The MuJoCo TaskEnvironment. ``seed`` is unused: every episode resets with its own."""
    from runtime.sim import TaskEnvironment

    del seed
    return TaskEnvironment.from_deployment(deployment_dir, settle_steps=settle_steps)
