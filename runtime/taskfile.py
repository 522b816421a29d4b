"""Reading and writing ``task.yaml`` files.

Task files come from users and from other people's repositories, so reading is defensive: the
file must be a regular file (never a FIFO or a device: ``runtime.inputs.reading``) of at most
1 MiB, parsed with the safe loader, and YAML anchors/aliases are refused outright (a few lines
of nested aliases can expand to gigabytes — the "billion laughs" attack). Nesting is bounded
(``MAX_TASK_DEPTH``): the composer recurses per level, and 500 levels in 1 KB would otherwise
end in a ``RecursionError``. Duplicate mapping keys are refused too, since YAML would silently
keep the last one. Every failure is a one-line ``ConfigError`` naming the file (and the line,
when YAML knows it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import structlog
import yaml

from domain.canonical import sha256_hex
from domain.errors import ConfigError
from domain.task import TaskSpec, parse_task, task_to_dict
from runtime.inputs.reading import read_bounded

log = structlog.get_logger(__name__)

MAX_TASK_BYTES = 1024 * 1024
#: Far deeper than any task needs (about 6 levels), far shallower than Python's stack.
MAX_TASK_DEPTH = 32
#: Validated tasks kept per process, by the SHA-256 of their bytes (see load_task_with_digest).
PARSED_TASKS_KEPT = 256
_PARSED: OrderedDict[str, TaskSpec] = OrderedDict()
_PARSED_LOCK = threading.Lock()


class _StrictLoader(yaml.SafeLoader):
    """Safe loader without anchors, aliases, duplicate keys or deep nesting."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.MarkedYAMLError(
                problem="YAML anchors and aliases are not allowed in task files",
                problem_mark=event.start_mark,
            )
        if self._depth >= MAX_TASK_DEPTH:
            raise yaml.MarkedYAMLError(
                problem=f"nested more than {MAX_TASK_DEPTH} levels deep",
                problem_mark=event.start_mark,
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

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


def read_task_bytes(path: str | Path) -> bytes:
    """The bytes of a task file: a regular file (a symlink the user typed is followed) of at
    most ``MAX_TASK_BYTES``. Read once: what is parsed is what ``task_sha256`` digests."""
    return read_bounded(
        path, limit=MAX_TASK_BYTES, what="task file", follow_symlinks=True,
        error=lambda message: ConfigError("", message),
    )


def parse_task_bytes(data: bytes, source: str) -> Any:
    """The YAML value of task file bytes, read with the strict loader."""
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
    except RecursionError:  # a belt to the depth bound's braces (flow collections)
        raise ConfigError("", "invalid YAML: nested too deeply", source=source) from None


def read_task_mapping(path: str | Path) -> Any:
    """The YAML value of a task file, read under the size cap with the strict loader."""
    return parse_task_bytes(read_task_bytes(path), str(path))


def load_task_with_digest(path: str | Path) -> tuple[TaskSpec, str]:
    """The validated task and the SHA-256 of exactly the bytes that were parsed.

    A collection reads each batch's deployment task more than once (the worker, the asset
    replacement, the robomimic writer's scene model), and the pure-Python YAML composer costs
    milliseconds each time, holding the GIL. A ``TaskSpec`` is a frozen value and a function of
    the bytes alone, so the bytes are still read every time and a task already validated from
    the same bytes (same SHA-256) is returned again; a file that changed is parsed anew.
    Failures are never kept (their messages name the file)."""
    data = read_task_bytes(path)
    digest = sha256_hex(data)
    with _PARSED_LOCK:
        spec = _PARSED.get(digest)
        if spec is not None:
            _PARSED.move_to_end(digest)
    if spec is None:
        spec = parse_task(parse_task_bytes(data, str(path)), source=str(path))
        with _PARSED_LOCK:
            _PARSED[digest] = spec
            while len(_PARSED) > PARSED_TASKS_KEPT:
                _PARSED.popitem(last=False)
    log.debug("task_loaded", path=str(path), task_id=spec.task_id)
    return spec, digest


def load_task(path: str | Path) -> TaskSpec:
    """Read and validate a task file; every failure is a ``ConfigError`` naming the file."""
    return load_task_with_digest(path)[0]


def dump_task(spec: TaskSpec) -> str:
    """Deterministic YAML text of ``spec`` (same spec -> same bytes), readable by ``load_task``."""
    return yaml.safe_dump(
        task_to_dict(spec),
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )
