"""The process builder: the in-process builder run in a child process, over a socket pair.

The child is a fresh interpreter (``python .../process_main.py FD PARENT_PID``, spawned with
``subprocess``, never forked: a process forked after a GL context exists hangs, and cameras
render in this process tree). It is started with the session, so its imports (numpy, pyarrow,
h5py, the export code) overlap the first batch, opens its own read-only store from the URL the
parent sends through the pipe (never on argv: it may hold a password), and builds one version
per request with :class:`~runtime.export.live_builders.in_process.InProcessBuilder`.

Protocol (pickled tuples, ``multiprocessing`` framing). Parent to child: ``init`` (run, specs,
URL, logging settings), ``build`` (version), ``fence`` (the answer: ok or not), ``stop``.
Child to parent, per ``build``: any number of ``fence`` questions, then one of ``built``
(events, wall and CPU seconds), ``error`` (the exception, pickled), ``aborted`` (the fence
said no: nothing was published).

The fence: right before a build switches a dataset to its new version, the child asks, and the
parent runs the session's own lease check. If that raises, the parent answers no, the child
discards its temporary version and publishes nothing, and the parent raises the very exception
the check raised. The child dies with its parent (:mod:`.process_main`: the kernel kills it);
failing that, if the pipe closes it publishes nothing and exits, and it exits within about
half a second of its parent's end while it is idle or waits for the log. It ignores SIGINT,
and :meth:`ProcessBuilder.close` stops and reaps it. Whoever opens a process builder closes
it from the same thread (the kernel's parent-death signal follows the spawning thread).
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from runtime.child_process import ChildProcess
from runtime.export.live_builders import Built

_PARENT_CHECK_S = 0.5
_STOP_TIMEOUT_S = 10.0


class BuilderDied(RuntimeError):
    """The dataset builder process is gone (killed, or crashed)."""


# ---------------------------------------------------------------------------- parent side


class ProcessBuilder:
    """The parent's handle of one session's builder process."""

    kind = "process"
    shares_gil = False

    def __init__(
        self,
        run_id: str,
        specs: Sequence[Any],
        url: str,
        *,
        before_publish: Callable[[], None],
    ) -> None:
        from runtime.logging import logging_settings

        self.before_publish = before_publish
        self._child = ChildProcess(
            Path(__file__).with_name("process_main.py"), str(os.getpid()),
            what="dataset builder", died=BuilderDied,
        )
        self.process = self._child.process
        self._send_lock = threading.Lock()
        self._send(("init", run_id, tuple(specs), url, logging_settings()))

    @property
    def pid(self) -> int:
        return self._child.pid

    def build(self, version: int) -> Built:
        self._send(("build", version))
        refused: BaseException | None = None
        while True:
            kind, *rest = self._recv()
            if kind == "fence":
                try:
                    self.before_publish()
                except BaseException as error:  # the child publishes nothing
                    refused = error
                    self._send(("fence", False))
                else:
                    self._send(("fence", True))
            elif kind == "built":
                events, wall_s, cpu_s = rest
                return Built(events, wall_s, cpu_s)
            elif refused is not None:  # whatever the child's last word, the fence failed
                raise refused
            elif kind == "error":
                raise rest[0]
            else:
                raise BuilderDied(f"the dataset builder sent an unexpected reply {kind!r}")

    def stop(self) -> None:
        try:
            self._send(("stop",))
        except BuilderDied:
            pass

    def close(self) -> None:
        self.stop()
        self._child.close(_STOP_TIMEOUT_S)  # publishing is atomic: a kill leaves a whole version

    def _send(self, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            self._child.send(message)

    def _recv(self) -> tuple[Any, ...]:
        return tuple(self._child.recv())


# ---------------------------------------------------------------------------- child side


class _ParentGone(BaseException):
    """The pipe closed or the parent died: publish nothing, exit (not an Exception, so no
    handler in the build swallows it on its way out)."""


class _FenceRefused(BaseException):
    """The parent's lease check failed: publish nothing, say so."""


class _Child:
    """The child's end of the pipe: the next message, the fence, the replies."""

    def __init__(self, connection: Connection, parent_pid: int) -> None:
        self.connection = connection
        self.parent_pid = parent_pid

    def parent_gone(self) -> bool:
        return os.getppid() != self.parent_pid

    def next_message(self) -> tuple[Any, ...] | None:
        """The parent's next message; None once the pipe is closed or the parent is gone."""
        while True:
            try:
                if self.connection.poll(_PARENT_CHECK_S):
                    return tuple(self.connection.recv())
            except (EOFError, OSError):
                return None
            if self.parent_gone():
                return None

    def send(self, message: tuple[Any, ...]) -> bool:
        try:
            self.connection.send(message)
        except (OSError, ValueError):
            return False
        return True

    def fence(self) -> None:
        """``before_publish`` in the child: the parent's answer, or no publish at all."""
        if not self.send(("fence",)):
            raise _ParentGone
        answer = self.next_message()
        if answer is None or answer[0] != "fence":
            raise _ParentGone  # gone, or told to stop while building
        if answer[1] is not True:
            raise _FenceRefused

    def wait_for_log(self, seconds: float) -> bool:
        """Pause while the log is behind; True (give up) when the parent wrote (only ``stop``
        can come during a build), closed the pipe, or died."""
        try:
            return self.connection.poll(seconds) or self.parent_gone()
        except (EOFError, OSError):
            return True


def transferable(error: BaseException) -> BaseException:
    """``error`` if it survives pickling both ways (class and message kept), else a
    RuntimeError naming its class; the child's traceback rides along as a note."""
    note = "In the dataset builder process:\n" + "".join(traceback.format_exception(error))
    error.add_note(note)
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        fallback = RuntimeError(f"{type(error).__name__}: {error}")
        fallback.add_note(note)
        return fallback
    return error


def serve(connection: Connection, parent_pid: int) -> None:
    """The child's loop (see the module docstring) until ``stop`` or the parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (process_main did so already)
    child = _Child(connection, parent_pid)
    message = child.next_message()
    if message is None or message[0] != "init":
        return
    _kind, run_id, specs, url, settings = message
    if settings is not None:
        from runtime.logging import configure_logging

        configure_logging(**settings)
    store: Any = None
    opening: BaseException | None = None
    try:
        store, builder = _open(run_id, specs, url, child)
    except Exception as error:  # said at the first build, where the thread builder says it
        opening = error
    try:
        while (message := child.next_message()) is not None and message[0] == "build":
            if opening is not None:
                reply: tuple[Any, ...] = ("error", transferable(opening))
            else:
                try:
                    built = builder.build(message[1])
                    reply = ("built", built.events, built.wall_s, built.cpu_s)
                except _FenceRefused:
                    reply = ("aborted",)
                except _ParentGone:
                    return
                except Exception as error:
                    reply = ("error", transferable(error))
            if not child.send(reply):
                return
    finally:
        if store is not None:
            store.close()


def _open(run_id: str, specs: Sequence[Any], url: str, child: _Child) -> tuple[Any, Any]:
    """The child's read-only store and builder, with the formats' writers imported now (while
    the collector runs its first batch), not in the first build."""
    from runtime.export.live_builders.in_process import InProcessBuilder
    from store import EventStore

    formats = {spec.format for spec in specs}
    if "lerobot" in formats:
        import runtime.export.lerobot  # noqa: F401
    if "robomimic" in formats:  # its demos carry each deployment's compiled scene
        import h5py  # noqa: F401

        import runtime.export.robomimic  # noqa: F401
        import runtime.export.scene_model  # noqa: F401
        import runtime.sim.environment  # noqa: F401
    store = EventStore(url, read_only=True)
    builder = InProcessBuilder(
        run_id, specs, store, before_publish=child.fence, wait_for_log=child.wait_for_log,
        cpu_clock=time.process_time,
    )
    return store, builder
