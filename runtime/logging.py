"""One place that decides how assetcast logs look.

Library code only ever calls ``structlog.get_logger(__name__)`` and never chooses a format;
the command line calls :func:`configure_logging` once, so the same events come out as
``key=value`` lines for a person at a terminal or as JSON lines for a machine (``--log-json``).
Logs go to stderr so they never mix with command output (tables, reports) on stdout.
"""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path
from typing import Any, TextIO

import structlog

from domain.errors import AssetcastInputError

LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


# The last configure_logging call's choices (None: never called, or to a fixed stream), for a
# helper process that must log the way this one does (see logging_settings).
_SETTINGS: dict[str, Any] | None = None


class LogLevelError(AssetcastInputError):
    """``--log-level`` named a level that does not exist."""


class _StderrLoggerFactory:
    """Writes to whatever ``sys.stderr`` is *at call time* (tests swap it), or a fixed stream."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def __call__(self, *args: Any) -> structlog.WriteLogger:
        return structlog.WriteLogger(self._stream if self._stream is not None else sys.stderr)


def level_number(level: str) -> int:
    try:
        return LEVELS[level.lower()]
    except KeyError:
        raise LogLevelError(
            f"--log-level: unknown level {level!r} (choose from {', '.join(LEVELS)})"
        ) from None


def configure_logging(
    *, level: str = "info", json_lines: bool = False, stream: TextIO | None = None
) -> None:
    """Configure structlog (and route the standard library's logging through the same stream).

    ``stream`` defaults to the current ``sys.stderr``. Colours are used only when the stream is
    a terminal, so redirected logs stay plain ``key=value`` text.
    """
    global _SETTINGS
    threshold = level_number(level)
    _SETTINGS = {"level": level, "json_lines": json_lines} if stream is None else None
    target = stream if stream is not None else sys.stderr
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer: Any
    if json_lines:
        shared.append(structlog.processors.dict_tracebacks)
        renderer = structlog.processors.JSONRenderer(sort_keys=True)
    else:
        is_tty = bool(getattr(target, "isatty", lambda: False)())
        renderer = structlog.dev.ConsoleRenderer(
            colors=is_tty, exception_formatter=structlog.dev.plain_traceback
        )
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=_StderrLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    _route_stdlib_logging(threshold, json_lines, stream)
    _route_library_warnings()


def logging_settings() -> dict[str, Any] | None:
    """The ``configure_logging`` keywords this process logs with (None: not configured, or
    to a stream of its own), so a child process started by it logs the same way to the
    stderr it inherits."""
    return None if _SETTINGS is None else dict(_SETTINGS)


def _route_stdlib_logging(threshold: int, json_lines: bool, stream: TextIO | None) -> None:
    """Third-party libraries (alembic, sqlalchemy) log through ``logging``; format them alike.

    Their chatter is capped at WARNING unless ``--log-level debug`` asks for everything.
    """
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=True)
        if json_lines
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ],
    )
    handler = _CurrentStderrHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for existing in list(root.handlers):
        if getattr(existing, "_assetcast", False):
            root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(threshold if threshold <= logging.DEBUG else max(threshold, logging.WARNING))


class _CurrentStderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that follows ``sys.stderr`` when no stream was fixed."""

    _assetcast = True

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__(stream if stream is not None else sys.stderr)
        self._fixed = stream is not None

    def emit(self, record: logging.LogRecord) -> None:
        if not self._fixed:
            self.stream = sys.stderr
        super().emit(record)


#: Packages whose ``warnings.warn`` output becomes a debug log line instead of raw stderr text.
QUIET_WARNING_PACKAGES = ("trimesh",)
_original_showwarning = warnings.showwarning


def _package_of(filename: str) -> str | None:
    parts = Path(filename).parts
    for name in QUIET_WARNING_PACKAGES:
        if name in parts:
            return name
    return None


def _log_library_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """trimesh warns (``RuntimeWarning: invalid value encountered in divide``) while computing
    mass properties of open or degenerate meshes, which our checks handle; the raw two-line
    warning on stderr reads like a failure, so it becomes a structured debug line."""
    package = _package_of(filename)
    if package is None:
        _original_showwarning(message, category, filename, lineno, file, line)
        return
    structlog.get_logger(__name__).debug(
        "library_warning", package=package, category=category.__name__,
        message=str(message), location=f"{Path(filename).name}:{lineno}",
    )


def _route_library_warnings() -> None:
    warnings.showwarning = _log_library_warning
