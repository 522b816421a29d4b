"""Where a collection's episodes run: one interface (:mod:`.base`), one module per variant."""

from runtime.collection.executors.base import (
    BatchDone,
    BatchOpened,
    BatchWork,
    EpisodeDone,
    Executor,
    Report,
    Where,
    WorkSettings,
)
from runtime.collection.executors.local import LocalExecutor

__all__ = [
    "BatchDone",
    "BatchOpened",
    "BatchWork",
    "EpisodeDone",
    "Executor",
    "LocalExecutor",
    "Report",
    "Where",
    "WorkSettings",
]
