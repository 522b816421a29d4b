"""Every file reference inside a package must stay inside the package.

Mesh loaders happily follow ``mtllib``, texture maps, glTF buffer/image URIs and
PLY ``TextureFile`` comments. If any of those could point at ``/etc``, at
``../other_package`` or at a URL, the bytes a simulator sees would not be the
bytes we hashed. So before a loader touches a package we parse those references
ourselves and refuse absolute paths, ``..`` escapes, URLs and missing targets.
(``data:`` URIs in glTF are self-contained and allowed.)
"""

from __future__ import annotations

import posixpath
import struct
from collections.abc import Mapping
from urllib.parse import unquote

from domain.errors import AssetValidationError
from domain.paths import contained_relpath
from runtime.inputs.json_text import load_json_strict

MESH_FORMATS = {".obj": "obj", ".stl": "stl", ".ply": "ply", ".glb": "glb", ".gltf": "gltf"}
_MTL_MAP_KEYS = {
    "map_ka", "map_kd", "map_ks", "map_ke", "map_ns", "map_d", "map_bump", "bump", "disp",
    "decal", "refl", "norm", "map_pr", "map_pm", "map_ps", "map_rma", "map_orm",
}


def mesh_format(path: str, *, where: str) -> str:
    """The loader name for a mesh path, or an error for anything we do not accept."""
    suffix = posixpath.splitext(path)[1].lower()
    if suffix not in MESH_FORMATS:
        raise AssetValidationError(
            f"{where}: unsupported mesh format {suffix or path!r} "
            f"(expected one of {', '.join(sorted(MESH_FORMATS))})"
        )
    return MESH_FORMATS[suffix]


def check_reference_path(ref: str, base_dir: str, *, where: str) -> str:
    """Resolve ``ref`` (relative to ``base_dir`` inside the package) to a package relpath
    (the one containment rule, ``domain.paths.contained_relpath``)."""
    return contained_relpath(
        ref, base_dir=base_dir, where=where, error=AssetValidationError, root="the package"
    )


def _target(ref: str, referrer: str, files: Mapping[str, bytes], where: str) -> str:
    rel = check_reference_path(ref, posixpath.dirname(referrer), where=where)
    if rel not in files:
        raise AssetValidationError(f"{where}: referenced file {ref!r} is missing")
    return rel


def _gltf_target(uri: str, referrer: str, files: Mapping[str, bytes], where: str) -> str:
    """glTF URIs are percent-encoded by spec but some loaders use them verbatim: both
    spellings must stay inside the package, and one of them must exist."""
    base = posixpath.dirname(referrer)
    spellings = [check_reference_path(uri, base, where=where)]
    decoded = unquote(uri)
    if decoded != uri:
        spellings.append(check_reference_path(decoded, base, where=where))
    for rel in spellings:
        if rel in files:
            return rel
    raise AssetValidationError(f"{where}: referenced file {uri!r} is missing")


def _text_lines(data: bytes) -> list[str]:
    return data.decode("utf-8", errors="replace").splitlines()


def _obj_references(rel: str, data: bytes) -> list[tuple[str, str]]:
    if b"mtllib" not in data:  # the only directive that references a file
        return []
    refs = []
    for number, line in enumerate(_text_lines(data), start=1):
        parts = line.split("#", 1)[0].split()
        if parts and parts[0] == "mtllib":
            if len(parts) < 2:
                raise AssetValidationError(f"{rel}:{number}: mtllib without a file name")
            refs.extend((name, f"{rel}:{number}: mtllib") for name in parts[1:])
    return refs


def _mtl_references(rel: str, data: bytes) -> list[tuple[str, str]]:
    refs = []
    for number, line in enumerate(_text_lines(data), start=1):
        parts = line.split("#", 1)[0].split()
        if parts and parts[0].lower() in _MTL_MAP_KEYS:
            if len(parts) < 2:
                raise AssetValidationError(f"{rel}:{number}: {parts[0]} without a file name")
            # Options such as ``-s 1 1 1`` precede the file name, which comes last.
            refs.append((parts[-1], f"{rel}:{number}: {parts[0]}"))
    return refs


def _ply_references(rel: str, data: bytes) -> list[tuple[str, str]]:
    end = data.find(b"end_header")
    header = data[: end if end >= 0 else 4096]
    refs = []
    for number, line in enumerate(_text_lines(header), start=1):
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "comment" and parts[1].lower() == "texturefile":
            refs.append((" ".join(parts[2:]), f"{rel}:{number}: TextureFile"))
    return refs


def _gltf_json_references(rel: str, doc: object) -> list[tuple[str, str]]:
    if not isinstance(doc, dict):
        raise AssetValidationError(f"{rel}: glTF JSON must be an object")
    refs = []
    for section in ("buffers", "images"):
        items = doc.get(section, [])
        if not isinstance(items, list):
            raise AssetValidationError(f"{rel}: {section} must be a list")
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise AssetValidationError(f"{rel}: {section}[{index}] must be an object")
            uri = item.get("uri")
            if uri is None:
                continue
            where = f"{rel}: {section}[{index}].uri"
            if not isinstance(uri, str):
                raise AssetValidationError(f"{where}: must be a string")
            if uri.startswith("data:"):
                continue
            refs.append((uri, where))
    return refs


def _gltf_references(rel: str, data: bytes) -> list[tuple[str, str]]:
    doc = load_json_strict(data, f"{rel}: glTF", error=AssetValidationError)
    return _gltf_json_references(rel, doc)


def glb_json_chunk(rel: str, data: bytes) -> bytes:
    """The JSON chunk of a GLB file (its glTF document)."""
    if len(data) < 20 or data[:4] != b"glTF":
        raise AssetValidationError(f"{rel}: not a GLB file (bad magic)")
    _, version, length = struct.unpack_from("<4sII", data, 0)
    if version != 2 or length > len(data):
        raise AssetValidationError(f"{rel}: unsupported or truncated GLB (version {version})")
    chunk_length, chunk_type = struct.unpack_from("<I4s", data, 12)
    if chunk_type != b"JSON" or 20 + chunk_length > len(data):
        raise AssetValidationError(f"{rel}: GLB does not start with a JSON chunk")
    return data[20 : 20 + chunk_length]


def _glb_references(rel: str, data: bytes) -> list[tuple[str, str]]:
    return _gltf_references(rel, glb_json_chunk(rel, data))


def check_references(entry: str, files: Mapping[str, bytes]) -> list[str]:
    """Follow every reference from mesh ``entry``; return the package files it uses.

    ``files`` maps package relpaths to their bytes. Raises AssetValidationError naming
    the referring file (and line) for any reference that leaves the package.
    """
    if entry not in files:
        raise AssetValidationError(f"{entry}: mesh file is missing from the package")
    kind = mesh_format(entry, where=entry)
    used = [entry]
    if kind == "obj":
        for ref, where in _obj_references(entry, files[entry]):
            mtl = _target(ref, entry, files, where)
            used.append(mtl)
            for tex, tex_where in _mtl_references(mtl, files[mtl]):
                used.append(_target(tex, mtl, files, tex_where))
    elif kind == "ply":
        for ref, where in _ply_references(entry, files[entry]):
            used.append(_target(ref, entry, files, where))
    elif kind in ("gltf", "glb"):
        parse = _gltf_references if kind == "gltf" else _glb_references
        for uri, where in parse(entry, files[entry]):
            used.append(_gltf_target(uri, entry, files, where))
    return sorted(set(used))
