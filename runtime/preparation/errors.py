"""What preparation raises. Bad input subclasses ``AssetcastInputError`` (exit 2); the rest
are run failures (exit 1) that are recorded in the run's log before they propagate."""

from __future__ import annotations

from domain.errors import AssetcastError, AssetcastInputError


class PreparationFailed(AssetcastError):
    """Matching found no asset set for a batch; ``RunFailed`` is already in the log.

    The structured ``MatchingError`` is the ``__cause__``; the CLI maps this to exit 1.
    """


class ProviderContractError(AssetcastInputError, TypeError):
    """A supplied provider object does not implement ``AssetProvider``."""


class ProviderMisbehaved(AssetcastError):
    """A provider broke its contract while listing (too many items, wrong types, dup ids)."""


class NondeterministicResume(AssetcastError):
    """Re-deriving a logged fact gave a different answer; resuming would corrupt the run."""
