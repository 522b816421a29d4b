"""Error taxonomy shared by every layer.

Every error a user can cause derives from ``AssetcastInputError`` so the CLI can
turn it into exit code 2 with a single line, while programming or environment
failures keep their own identity and propagate.
"""

from __future__ import annotations


class AssetcastError(Exception):
    """Base class of every error assetcast raises on purpose."""


class AssetcastInputError(AssetcastError, ValueError):
    """Bad input from a user: a file, a field, a flag. The CLI exits 2."""


class ConfigError(AssetcastInputError):
    """A field of a task file or configuration is invalid; ``path`` names it."""

    def __init__(self, path: str, message: str, *, source: str | None = None) -> None:
        self.path = path
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{path}: {message}" if path else f"{where}{message}")


class AssetValidationError(AssetcastInputError):
    """An asset package or snapshot failed verification."""


class DeploymentInvalid(AssetcastInputError):
    """A deployment directory no longer matches its manifest."""


class StoreError(AssetcastError):
    """Base of event store failures."""


class IllegalTransition(StoreError):
    """An event is not legal in the run's current state."""


class ConcurrencyError(StoreError):
    """An append used a stale expected version."""


class LeaseHeld(StoreError):
    """Another live session holds the run."""


class SessionLost(StoreError):
    """This session no longer holds the run's lease (another session took it over, so its
    fencing token moved on): it must stop without publishing or appending anything."""


class UnknownRun(AssetcastInputError, StoreError):
    """The named run does not exist in the store."""


class EventSchemaError(StoreError):
    """An event payload, type or schema version is not understood.

    A stored event that fails to decode carries its ``run_id`` and ``seq``, so a report
    over many runs can name the broken one and go on with the others."""

    run_id: str | None = None
    seq: int | None = None


_RECORDED = "assetcast_recorded_in_run"


def mark_recorded(error: BaseException, run_id: str) -> None:
    """Note that ``run_id``'s log now holds ``error`` as its ``RunFailed``.

    Exit 2 promises that nothing was recorded, so an input error found after a run began
    (a deployment edited mid-run, a package whose mesh does not load) must be reported as
    that run's failure (exit 1). The error keeps its class; this marks it instead.
    """
    setattr(error, _RECORDED, run_id)


def recorded_in_run(error: BaseException) -> str | None:
    """The run whose ``RunFailed`` records ``error``, if any (see ``mark_recorded``)."""
    value = getattr(error, _RECORDED, None)
    return value if isinstance(value, str) else None
