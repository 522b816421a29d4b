"""Child process of the stale-holder attack tests: prepare or collect a run, pausing once at
a chosen point so the parent can SIGSTOP it exactly there.

``python -m tests.e2e.stale_worker prepare DB CATALOG OUT RUN_ID PAUSE MARKER`` or
``python -m tests.e2e.stale_worker collect DB RUN_ID PAUSE MARKER``.

``PAUSE`` is ``check:<caller>:<n>`` (the n-th lease check made by function ``<caller>``,
i.e. right before the n-th fenced publication of that kind: ``prepare_package`` for a cache
snapshot, ``materialize_deployment``, ``write_stream_atomic`` (under ``write_bytes_atomic``) for a trajectory or report) or
``append:<n>`` (right before the n-th store append). At that point the child writes
``MARKER`` and sleeps, and the parent stops it; when it is continued, it goes on exactly
where it was. The lease TTL comes from ``ASSETCAST_LEASE_TTL_S`` set by the parent.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any


def _pause(marker: Path) -> None:
    marker.write_text("paused", encoding="utf-8")
    time.sleep(5.0)  # the parent's SIGSTOP lands in here


def install_pause(spec: str, marker: Path) -> None:
    from runtime.session import Session
    from store import EventStore

    kind, _, rest = spec.partition(":")
    seen = {"n": 0}
    if kind == "check":
        caller, _, nth = rest.rpartition(":")
        real_check = Session.check

        def check(self: Session) -> None:
            if sys._getframe(1).f_code.co_name == caller:
                seen["n"] += 1
                if seen["n"] == int(nth):
                    _pause(marker)
            real_check(self)

        Session.check = check  # type: ignore[method-assign]
    elif kind == "append":
        real_append = EventStore.append

        def append(self: EventStore, *args: Any, **kwargs: Any) -> int:
            seen["n"] += 1
            if seen["n"] == int(rest):
                _pause(marker)
            return real_append(self, *args, **kwargs)

        EventStore.append = append  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown pause {spec!r}")


def main(argv: list[str]) -> None:
    from runtime.logging import configure_logging

    configure_logging(level="warning")
    from store import EventStore

    mode = argv[0]
    if mode == "prepare":
        db, catalog, out, run_id, pause, marker = argv[1:]
        install_pause(pause, Path(marker))
        from domain.config import CollectionConfig
        from runtime.collection.demo_run import demo_task_path
        from runtime.prepare import prepare, providers_from_catalog_args

        providers = providers_from_catalog_args([f"item={catalog}", f"bin={catalog}"])
        prepare(
            demo_task_path(), providers, cfg=CollectionConfig(seed=11, max_batches=2),
            output_dir=out, store=EventStore(db), run_id=run_id,
        )
    elif mode == "collect":
        db, run_id, pause, marker = argv[1:]
        install_pause(pause, Path(marker))
        from runtime.collection import collect

        collect(run_id, store=EventStore(db), progress=False)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
