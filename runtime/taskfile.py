"""Reading and writing ``task.yaml`` files.

Task files come from users and from other people's repositories, so reading is defensive: the
file is capped at 1 MiB, parsed with the safe loader, and YAML anchors/aliases are refused
outright (a few lines of nested aliases can expand to gigabytes — the "billion laughs"
attack). Duplicate mapping keys are refused too, since YAML would silently keep the last one.
Every failure is a one-line ``ConfigError`` naming the file (and the line, when YAML knows it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog
import yaml

from domain.errors import ConfigError
from domain.task import TaskSpec, parse_task, task_to_dict

log = structlog.get_logger(__name__)

MAX_TASK_BYTES = 1024 * 1024


class _StrictLoader(yaml.SafeLoader):
    """Safe loader without anchors, aliases or duplicate keys."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.MarkedYAMLError(
                problem="YAML anchors and aliases are not allowed in task files",
                problem_mark=event.start_mark,
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # unhashable key: the base class reports it with its mark
                break
            if duplicate:
                raise yaml.MarkedYAMLError(
                    problem=f"duplicate key {key!r}", problem_mark=key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _yaml_error(error: yaml.YAMLError, source: str) -> ConfigError:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    if mark is None:
        return ConfigError("", f"invalid YAML: {problem}", source=source)
    return ConfigError(
        f"line {mark.line + 1}, column {mark.column + 1}", f"invalid YAML: {problem}", source=source
    )


def read_task_mapping(path: str | Path) -> Any:
    """The YAML value of a task file, read under the size cap with the strict loader."""
    source = str(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_TASK_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError("", "task file not found", source=source) from None
    except IsADirectoryError:
        raise ConfigError("", "task file is a directory", source=source) from None
    except OSError as error:
        raise ConfigError("", f"cannot read task file: {error.strerror}", source=source) from None
    if len(data) > MAX_TASK_BYTES:
        raise ConfigError("", f"task file is larger than {MAX_TASK_BYTES} bytes", source=source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(
            "", f"task file is not UTF-8 (byte {error.start})", source=source
        ) from None
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - _StrictLoader is a SafeLoader
    except yaml.YAMLError as error:
        raise _yaml_error(error, source) from None


def load_task(path: str | Path) -> TaskSpec:
    """Read and validate a task file; every failure is a ``ConfigError`` naming the file."""
    spec = parse_task(read_task_mapping(path), source=str(path))
    log.debug("task_loaded", path=str(path), task_id=spec.task_id)
    return spec


def dump_task(spec: TaskSpec) -> str:
    """Deterministic YAML text of ``spec`` (same spec -> same bytes), readable by ``load_task``."""
    return yaml.safe_dump(
        task_to_dict(spec),
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )
