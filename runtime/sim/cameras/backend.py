"""Which offscreen OpenGL backend renders the cameras: EGL, else OSMesa, or the user's choice.

MuJoCo picks its GL backend from ``MUJOCO_GL`` once, when ``mujoco`` is first imported, and
PyOpenGL picks its platform from ``PYOPENGL_PLATFORM`` once, when ``OpenGL`` is first
imported. Both happen long before a camera is known, so this module chooses at the first
render and installs the chosen context class into MuJoCo's renderer itself (the renderer
looks it up at construction). Probing loads the system library with ``ctypes`` first, so a
missing one is reported by name instead of as a PyOpenGL traceback.

Mesa's CPU rasterizer (llvmpipe) splits every pass over one thread per core; for the small
images cameras record (up to 256x256) the hand-off costs more than it saves (measured here:
0.37 vs 0.52 ms per 128x128 pass), so unless ``LP_NUM_THREADS`` is set it is pinned to one
thread when the first renderer of the process is no larger than that. Pixels are the same
with any thread count.

A GL context does not survive ``fork``: a child that renders with an inherited context hangs.
The at-fork hook makes such a child fail at once with a message instead.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass
from typing import Any

import structlog

from runtime.sim.cameras.errors import RenderBackendUnavailable

log = structlog.get_logger(__name__)

BACKEND_ENV = "ASSETCAST_RENDER_BACKEND"
BACKENDS: tuple[str, ...] = ("egl", "osmesa")
AUTO = "auto"
SINGLE_THREAD_MAX_PIXELS = 256 * 256


@dataclass(frozen=True)
class _Library:
    names: tuple[str, ...]
    package: str


_LIBRARIES: dict[str, _Library] = {
    "egl": _Library(("libEGL.so.1", "libEGL.so"), "libegl1"),
    "osmesa": _Library(("libOSMesa.so.8", "libOSMesa.so.6", "libOSMesa.so"), "libosmesa6"),
}

_chosen: str | None = None
_forked_child = False


def _mark_forked_child() -> None:
    global _forked_child
    if _chosen is not None:
        _forked_child = True


os.register_at_fork(after_in_child=_mark_forked_child)


def requested_backend(explicit: str | None = None) -> str:
    """``explicit`` (a CLI flag), else ``$ASSETCAST_RENDER_BACKEND``, else ``$MUJOCO_GL`` when
    it names an offscreen backend, else ``auto``."""
    for where, value in (
        ("--render-backend", explicit),
        (BACKEND_ENV, os.environ.get(BACKEND_ENV)),
    ):
        if value:
            choice = value.strip().lower()
            if choice not in (AUTO, *BACKENDS):
                raise RenderBackendUnavailable(
                    f"{where}: unknown render backend {value!r}; expected auto, egl or osmesa"
                )
            return choice
    mujoco_gl = os.environ.get("MUJOCO_GL", "").strip().lower()
    return mujoco_gl if mujoco_gl in BACKENDS else AUTO


def _load_library(backend: str) -> str | None:
    """The file name that loaded, or None when no candidate is installed."""
    for name in _LIBRARIES[backend].names:
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return name
    return None


def _missing(backend: str) -> str:
    library = _LIBRARIES[backend]
    return f"{backend} needs {library.names[0]} (apt-get install {library.package})"


def _context_class(backend: str) -> Any:
    """Import MuJoCo's context class for ``backend`` (sets PyOpenGL's platform if unset)."""
    platform = os.environ.get("PYOPENGL_PLATFORM")
    if platform and platform.lower() != backend:
        raise RenderBackendUnavailable(
            f"render backend {backend}: PYOPENGL_PLATFORM is {platform!r} in this process; "
            f"unset it or choose {platform.lower()}"
        )
    if "OpenGL" in sys.modules and not platform:
        raise RenderBackendUnavailable(
            f"render backend {backend}: PyOpenGL was imported before a backend was chosen; "
            f"set {BACKEND_ENV} (or MUJOCO_GL) before starting"
        )
    os.environ["PYOPENGL_PLATFORM"] = backend
    if backend == "egl":
        from mujoco.egl import GLContext
    else:
        from mujoco.osmesa import GLContext
    return GLContext


def _install(backend: str, context_class: Any) -> None:
    from mujoco.rendering.classic import gl_context

    gl_context.GLContext = context_class


def _try(backend: str) -> str | None:
    """None when ``backend`` works (a context was created and freed), else why not."""
    if _load_library(backend) is None:
        return _missing(backend)
    try:
        context_class = _context_class(backend)
        probe = context_class(16, 16)
        probe.make_current()
        probe.free()
    except RenderBackendUnavailable:
        raise
    except Exception as error:  # PyOpenGL and the drivers raise many types
        return f"{backend} could not create a context ({type(error).__name__}: {error})"
    _install(backend, context_class)
    return None


def _pin_rasterizer_threads(max_pixels: int | None) -> None:
    if max_pixels is not None and max_pixels <= SINGLE_THREAD_MAX_PIXELS:
        os.environ.setdefault("LP_NUM_THREADS", "1")


def ensure_backend(explicit: str | None = None, *, max_pixels: int | None = None) -> str:
    """Choose (once per process) and install the backend; its name. Raises
    ``RenderBackendUnavailable`` with one line naming what is missing. ``max_pixels``: the
    largest image the caller will render (chooses llvmpipe's thread count, see above)."""
    global _chosen
    if _forked_child:
        raise RenderBackendUnavailable(
            "this process was forked after an OpenGL context existed and would hang if it "
            "rendered; start renderers with the 'spawn' start method"
        )
    requested = requested_backend(explicit)
    if _chosen is not None:
        if requested not in (AUTO, _chosen):
            raise RenderBackendUnavailable(
                f"render backend {requested} requested, but this process already renders "
                f"with {_chosen}"
            )
        return _chosen
    candidates = BACKENDS if requested == AUTO else (requested,)
    _pin_rasterizer_threads(max_pixels)
    reasons = []
    for backend in candidates:
        reason = _try(backend)
        if reason is None:
            _chosen = backend
            log.debug("render_backend_chosen", backend=backend, requested=requested)
            return backend
        reasons.append(reason)
        if backend == "egl" and "OpenGL" in sys.modules:
            break  # PyOpenGL is now bound to EGL in this process; OSMesa cannot follow
    raise RenderBackendUnavailable("no offscreen rendering backend: " + "; ".join(reasons))
