"""The lexical half of the one path-containment rule (the filesystem half is
``runtime.inputs.paths``).

Every path that a task file, a package manifest, a mesh, a snapshot or a deployment names is
untrusted: it must be relative, use ``/``, carry no URL scheme, NUL or control character, and
stay inside its base after normalization. This function is pure so the domain can apply it
while parsing; it returns the normalized POSIX path that every caller then uses.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from domain.errors import AssetcastInputError
from domain.fields import forbidden_character

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

ErrorFactory = Callable[[str], Exception]


def contained_relpath(
    ref: str,
    *,
    base_dir: str = "",
    where: str,
    error: ErrorFactory = AssetcastInputError,
    root: str = "its folder",
) -> str:
    """``ref`` joined to ``base_dir`` (both relative to one root), normalized; refuses any
    path that is absolute, a URL, has a backslash/NUL/control character or escapes the root
    (named ``root`` in the message)."""
    if not isinstance(ref, str) or not ref.strip():
        raise error(f"{where}: empty path")
    if "\\" in ref:
        raise error(f"{where}: backslash in path {ref!r} (use '/')")
    if "\x00" in ref:
        raise error(f"{where}: NUL byte in path")
    bad = forbidden_character(ref)
    if bad is not None:
        raise error(f"{where}: control character {bad!r} in path {ref!r}")
    if _SCHEME.match(ref) or ref.startswith("//"):
        raise error(f"{where}: URLs are not allowed ({ref!r})")
    if ref.startswith("/") or ref.startswith("~"):
        raise error(f"{where}: absolute path {ref!r} is not allowed")
    joined = posixpath.normpath(posixpath.join(base_dir, ref))
    if joined == ".." or joined.startswith("../") or joined == ".":
        raise error(f"{where}: path {ref!r} escapes {root}")
    return joined
