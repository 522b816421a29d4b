"""Reading the plainest OBJ files without trimesh's general loader.

Most packages' meshes are plain OBJ: ``v x y z`` and ``f a b c`` lines (what our own
``obj_bytes`` writes), maybe comments and an ``mtllib``/``usemtl`` header. For those, what
``trimesh.load(..., process=False)`` returns is simple: the vertices in file order without the
unreferenced ones, faces renumbered to match. Building it through the general loader (text
normalisation, face grouping, a Scene, its flattening) cost more than a small package's whole
collision geometry. Anything else -- ``vt``/``vn``, polygons, negative or slashed indices,
groups, continuation lines, tabs -- returns None and the general loader reads the file, so a
file's mesh is the same whichever path read it (``tests/runtime/test_simple_obj.py``).
"""

from __future__ import annotations

import re
import warnings

import numpy as np

_ALLOWED = re.compile(
    r"(?:v [^ ]+ [^ ]+ [^ ]+|f [1-9][0-9]* [1-9][0-9]* [1-9][0-9]*|#[^\n]*|mtllib [^\n]*|)"
)
_USEMTL = re.compile(r"usemtl [^\n]*")


def _numbers(lines: list[str], dtype: type) -> np.ndarray:
    """The lines' numbers, parsed the way trimesh's OBJ loader parses them."""
    with warnings.catch_warnings():  # np.fromstring(sep=...) is deprecated, not going away
        warnings.simplefilter("ignore", DeprecationWarning)
        return np.fromstring(" ".join(lines), sep=" ", dtype=dtype)


def parse_simple_obj(data: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """``(vertices, faces)`` as trimesh loads ``data`` unprocessed, or None if the file is
    not of the plain kind this reader is sure about."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return None
    if "\r" in text or "\\" in text or "\t" in text:
        return None
    vertex_lines: list[str] = []
    face_lines: list[str] = []
    for line in text.strip().split("\n"):
        head = line[:2]
        if head == "v ":
            vertex_lines.append(line[2:])
        elif head == "f ":
            face_lines.append(line[2:])
        elif _USEMTL.fullmatch(line):
            if face_lines:
                return None  # a second material group: trimesh splits the mesh by it
        elif not _ALLOWED.fullmatch(line):
            return None
    if not vertex_lines or not face_lines:
        return None
    for line in vertex_lines:
        if line.count(" ") != 2:
            return None
    for line in face_lines:
        if not _ALLOWED.fullmatch("f " + line):
            return None
    try:
        vertices = _numbers(vertex_lines, np.float64)
        faces = _numbers(face_lines, np.int64)
    except ValueError:  # a token that is not a number
        return None
    if len(vertices) != 3 * len(vertex_lines) or len(faces) != 3 * len(face_lines):
        return None
    vertices = vertices.reshape((-1, 3))
    faces = faces.reshape((-1, 3)) - 1
    if int(faces.max()) >= len(vertices):
        return None  # a dangling index: the general loader decides what that means
    used = np.zeros(len(vertices), dtype=bool)
    used[faces] = True
    renumber = np.zeros(len(vertices), dtype=np.int64)
    renumber[used] = np.arange(int(used.sum()))
    return vertices[used].copy(), renumber[faces]
