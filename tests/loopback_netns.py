"""Running Ray only inside a loopback-only network namespace (tests and benchmarks).

On these machines Ray binds to the external interface even when told 127.0.0.1, so
nothing that starts Ray may run in the host's network namespace. A test or benchmark
re-executes itself as ``unshare --net [--pid --fork --mount-proc] sh -c 'ip link set lo up
&& exec CMD'`` (root needed, as in CI); inside, the only interface is ``lo``. Code that
starts Ray first calls :func:`require_loopback_only`, which refuses to go on anywhere else.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

MARKER_ENV = "ASSETCAST_LOOPBACK_NETNS"


class NamespaceUnavailable(RuntimeError):
    """A loopback-only network namespace could not be created here."""


def interfaces() -> set[str]:
    """Interfaces of THIS process's network namespace (``/proc/self/net/dev``; sysfs would
    show those of the namespace it was mounted in)."""
    lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]
    return {line.split(":", 1)[0].strip() for line in lines if ":" in line}


def in_loopback_only_namespace() -> bool:
    return interfaces() == {"lo"}


def require_loopback_only() -> None:
    if not in_loopback_only_namespace():
        raise NamespaceUnavailable(
            f"refusing to start Ray: this network namespace has interfaces "
            f"{sorted(interfaces())}, not only lo (run it through tests/loopback_netns.py)"
        )


def namespaced(argv: Sequence[str]) -> list[str]:
    """``argv`` wrapped to run in a fresh network namespace holding only a live ``lo``.

    Also a fresh PID namespace (``argv`` becomes its PID 1, with its own ``/proc``): when
    it exits the kernel ends every process left in it, so no Ray daemon outlives a test."""
    return [
        "unshare", "--net", "--pid", "--fork", "--mount-proc",
        "sh", "-c", f"ip link set lo up && exec {shlex.join(argv)}",
    ]


def probe() -> None:
    """Raise :class:`NamespaceUnavailable` naming why a namespace cannot be made here."""
    check = namespaced(["cat", "/proc/self/net/dev"])
    try:
        result = subprocess.run(check, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NamespaceUnavailable(f"cannot run {check[0]}: {error}") from error
    if result.returncode != 0:
        raise NamespaceUnavailable(
            f"`{shlex.join(check)}` failed ({result.returncode}): {result.stderr.strip()}"
        )
    names = sorted(
        line.split(":", 1)[0].strip() for line in result.stdout.splitlines()[2:] if ":" in line
    )
    if names != ["lo"]:
        raise NamespaceUnavailable(f"the new namespace has interfaces {names}, not only lo")


def run_namespaced(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in its own loopback-only namespace; output captured as text."""
    probe()
    full_env = {**os.environ, **(env or {}), MARKER_ENV: "1"}
    return subprocess.run(
        namespaced(argv), cwd=cwd, env=full_env, capture_output=True, text=True,
        timeout=timeout,
    )
