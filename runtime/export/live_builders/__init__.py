"""What builds a live dataset's versions: one interface, two variants (one module each).

:class:`~runtime.export.live.LiveDatasets` decides *when* to build (requests, pacing, the
outbox of `DatasetUpdated` events); a builder decides *how*: it reads the log up to a version,
folds it, projects it and publishes through the same code as `export`
(:func:`runtime.export.dataset.build_version`), so both variants give the same bytes.

* :mod:`.in_process` builds in the calling process (the live dataset's background thread);
  the default: on these 2-core machines the two are within the bench's noise on a quiet box
  (bench/bench_live_dataset.py, 60-episode collections, robomimic thread vs child: 1.07x vs
  1.09x in one run, 1.06x vs 1.02x in another; LeRobot 1.00x vs 1.02x) and the thread is
  clearly cheaper under load (1.00x vs 1.22x): a child costs 0.6-1.8 s of CPU to start per
  session and shares the cores and the disk journal all the same.
* :mod:`.process` (``ASSETCAST_LIVE_BUILDER=process``) runs that same in-process builder in a
  child process (spawned, never forked) that opens its own reader of the store. The collector
  then shares no GIL with the build (h5py and the hashing hold it for most of a build), and a
  build that crashes its interpreter cannot take the collector with it. Publishing stays
  fenced by the collector's lease: the child asks the parent right before the switch, and the
  parent answers with its session's own check.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from domain.errors import AssetcastInputError

BUILDERS = ("process", "thread")
BUILDER_ENV = "ASSETCAST_LIVE_BUILDER"


@dataclass(frozen=True)
class Built:
    """One build: the `DatasetUpdated` events to append, and what it cost (wall and CPU
    seconds, without the wait for the log to reach the requested version)."""

    events: list[tuple[str, dict[str, Any]]]
    wall_s: float
    cpu_s: float


class Builder(Protocol):
    """Builds versions of one run's live datasets, one at a time, in version order."""

    kind: str  # "process" or "thread"
    shares_gil: bool  # whether builds run under the collector's GIL

    def build(self, version: int) -> Built:
        """Wait until the log reaches ``version``, build and publish every dataset of it."""
        ...

    def stop(self) -> None:
        """Make a build that waits for the log give up (the collection is over)."""
        ...

    def close(self) -> None:
        """Release what the builder holds (the child process: stopped and reaped)."""
        ...


def store_url(store: Any) -> str | None:
    """The URL (password included) another process opens ``store`` with; None for a store
    only this process can see (in memory, or SQLite without a file)."""
    engine = getattr(store, "engine", None)
    if engine is None:
        return None
    url = engine.url
    if url.get_backend_name() == "sqlite":
        from store.engine import sqlite_path

        if sqlite_path(url) is None:
            return None
    return str(url.render_as_string(hide_password=False))


def requested_builder(kind: str | None = None) -> str:
    """``kind``, else ``$ASSETCAST_LIVE_BUILDER``, else ``"thread"``; a value that names no
    builder is bad input (the CLI checks it before anything is recorded)."""
    where = "builder"
    if kind is None:
        where, kind = BUILDER_ENV, os.environ.get(BUILDER_ENV, "").strip() or "thread"
    if kind not in BUILDERS:
        raise AssetcastInputError(
            f"{where} must be one of {', '.join(BUILDERS)}, not {kind!r}"
        )
    return kind


def open_builder(
    run_id: str,
    specs: Sequence[Any],
    store: Any,
    *,
    before_publish: Callable[[], None],
    kind: str | None = None,
) -> Builder:
    """A builder of ``kind`` (default: :func:`requested_builder`)."""
    where = "builder" if kind is not None else BUILDER_ENV
    kind = requested_builder(kind)
    if kind == "process":
        url = store_url(store)
        if url is None:
            raise ValueError(
                f"{where}: a process builder needs a store another process can open (a URL)"
            )
        from runtime.export.live_builders.process import ProcessBuilder

        return ProcessBuilder(run_id, specs, url, before_publish=before_publish)
    from runtime.export.live_builders.in_process import InProcessBuilder

    return InProcessBuilder(run_id, specs, store, before_publish=before_publish)
