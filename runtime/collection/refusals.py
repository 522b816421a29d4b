"""Every bad-input refusal of a collection, made before anything is recorded (exit 2)."""

from __future__ import annotations

from collections.abc import Sequence

from domain.task import CheckSpec
from runtime.collection.environment import EnvironmentFactory, default_environment_factory
from runtime.collection.plan import CollectionPlan, CollectionRefused


def _check_specs(value: Sequence[CheckSpec] | None, name: str) -> tuple[CheckSpec, ...] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise CollectionRefused(f"{name} must be a sequence of CheckSpec")
    items = tuple(value)
    for index, item in enumerate(items):
        if not isinstance(item, CheckSpec):
            raise CollectionRefused(
                f"{name}[{index}] must be a CheckSpec, got {type(item).__name__}"
            )
    return items


def refuse_bad_collection_input(
    plan: CollectionPlan,
    initial_checks: Sequence[CheckSpec] | None,
    final_checks: Sequence[CheckSpec] | None,
    environment_factory: EnvironmentFactory | None,
) -> tuple[tuple[CheckSpec, ...] | None, tuple[CheckSpec, ...] | None, EnvironmentFactory]:
    """Every bad-input refusal of a collection (exit 2), so that a caller about to record
    something (``resume`` appending ``RunResumed``) can make them all first."""
    initial = _check_specs(initial_checks, "initial_checks")
    final = _check_specs(final_checks, "final_checks")
    factory = environment_factory or default_environment_factory
    if not callable(factory):
        raise CollectionRefused("environment_factory must be callable")
    if environment_factory is None:
        _require_registered(plan, initial, final)
        _check_cameras(plan)
    return initial, final, factory


def _require_registered(
    plan: CollectionPlan,
    initial: tuple[CheckSpec, ...] | None,
    final: tuple[CheckSpec, ...] | None,
) -> None:
    """Refuse, before any event, a task naming checks or skills this process lacks."""
    pending = plan.pending_batches()
    if not pending:
        return
    from runtime.sim.registry import unregistered_message, unregistered_names
    from runtime.taskfile import load_task

    task = load_task(pending[0].deployment_path / "task.yaml")
    missing = unregistered_names(task, initial, final)
    if missing:
        raise CollectionRefused(f"run {plan.run_id}: {unregistered_message(missing)}")


def _check_cameras(plan: CollectionPlan) -> None:
    """Refuse, before any event, cameras that cannot record (see check_task_cameras)."""
    pending = plan.pending_batches()
    if not pending or not plan.record_trajectory:
        return
    from runtime.taskfile import load_task

    path = pending[0].deployment_path
    task = load_task(path / "task.yaml")
    if task.cameras:
        from runtime.sim.cameras.rig import check_task_cameras

        check_task_cameras(task, path)
