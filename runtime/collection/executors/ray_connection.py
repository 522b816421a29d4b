"""Starting or joining Ray, done before a run's lease is taken.

A collection on Ray that cannot reach Ray must fail as bad input (exit 2, nothing recorded),
not as a recorded run failure: so :func:`connected` brings Ray up first and the lease, the
`LeaseTakenOver`/`RunResumed`/`CollectionStarted` events and every other effect come only
after it worked. Ray is process-wide: when this process already has Ray (a test's cluster, a
caller's own ``ray.init``), it is used as it is and left running.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from domain.errors import AssetcastInputError

CONNECT_TIMEOUT_S = 10.0


class RayUnavailable(AssetcastInputError):
    """Ray could not be started (``--workers``) or joined (``--ray-address``)."""


def connect(workers: int, address: str | None) -> bool:
    """Make this process a Ray driver; True when this call started it (the caller then
    shuts it down), False when Ray was already initialized here."""
    import ray

    if ray.is_initialized():
        return False
    if address is not None:
        _require_listening(address)
    try:
        if address is not None:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        else:
            ray.init(
                num_cpus=workers,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
    except Exception as error:  # noqa: BLE001 - Ray raises many kinds here
        detail = " ".join(str(error).split())[:300]
        if address is not None:
            what = f"--ray-address {address}: no Ray cluster could be joined there"
        else:
            what = f"--workers {workers}: a local Ray instance could not be started"
        raise RayUnavailable(f"{what} ({type(error).__name__}: {detail})") from error
    return True


def _require_listening(address: str) -> None:
    """Refuse at once an address where nothing listens: ``ray.init`` itself keeps retrying
    such an address for many minutes. Only ``host:port`` is probed (``auto``, ``ray://``
    and the like are left to Ray)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or "/" in address or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as error:
        raise RayUnavailable(
            f"--ray-address {address}: no Ray cluster could be joined there "
            f"(nothing answers: {type(error).__name__}: {error})"
        ) from error


@contextmanager
def connected(workers: int, address: str | None) -> Iterator[None]:
    """Ray is up for the block (started or joined here, or already there); what this
    started is shut down at the end."""
    owns = connect(workers, address)
    try:
        yield
    finally:
        if owns:
            import ray

            ray.shutdown()
