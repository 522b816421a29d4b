"""Why an export refuses: each is bad input (CLI exit 2) and names the run, file or path."""

from __future__ import annotations

from domain.errors import AssetcastInputError


class ExportRefused(AssetcastInputError):
    """The dataset cannot be written from these runs to this path."""


class NoAcceptedEpisodes(ExportRefused):
    """None of the runs has a committed (accepted and recorded) episode."""


class TrajectoryVerificationFailed(ExportRefused):
    """A committed trajectory is missing or its bytes differ from the log's receipt."""


class TaskMismatch(ExportRefused):
    """Runs of different tasks (or different recorded columns) cannot share one dataset."""


class NotADataset(ExportRefused):
    """The output path exists and is not a dataset assetcast wrote (it is never touched)."""
