"""Live datasets: a collection session keeps its datasets up to date as batches finish.

The same code as `export` (:func:`runtime.export.dataset.build_version`) runs on the log as
it stands once the writer has drained, so a dataset never holds an episode the log lacks. The
session appends `DatasetUpdated` under the lease it already holds. A SIGKILL at any moment
leaves the previous complete version (or the new one) on disk; the next session brings it up to
date, and the final version equals what `export` writes from the finished log, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runtime.export.dataset import DatasetSpec, build_version
from runtime.export.episodes import EpisodeData, dataset_source, run_source
from runtime.export.record import needs_record

AppendNow = Callable[[list[tuple[str, dict[str, Any]]]], None]


class LiveDatasets:
    """The datasets one collection session maintains for its run."""

    def __init__(self, run_id: str, specs: Sequence[DatasetSpec]) -> None:
        self.run_id = run_id
        self.specs = tuple(specs)
        self._cache: dict[tuple[str, str], EpisodeData] = {}

    def __bool__(self) -> bool:
        return bool(self.specs)

    def update(self, store: Any, append_now: AppendNow) -> None:
        """Project the log's committed episodes into every dataset; record what changed."""
        events = store.read(self.run_id)
        run = run_source(self.run_id, events)
        if not run.episodes:
            return
        source = dataset_source([run], cache=self._cache)
        for spec in self.specs:
            version = build_version(spec, source)
            if needs_record(events, version):
                append_now(
                    [("DatasetUpdated", version.event_payload(self.run_id, run.log_position))]
                )
