"""Reading a trajectory file (``torch.save`` of a flat dict of tensors) straight into numpy.

Why: ``torch.load(weights_only=True)`` runs its restricted unpickler in Python and builds a
tensor per array; for the small files a collector writes that costs more than the rest of an
export's reading. The format is a zip archive (stored, not compressed) holding ``data.pkl``
and one raw little-endian record per storage. This reader runs the C unpickler with every
global refused except the two a tensor dict needs (``torch._utils._rebuild_tensor_v2`` and
``collections.OrderedDict`` for its empty hooks) and the typed storage names, maps each
storage record to a read-only numpy view of the file's bytes (no copy) and each tensor to a
view of that. Anything it does not recognize (another global, a non-contiguous or empty
tensor, big-endian data, autograd state) raises :class:`UnsupportedTrajectory`, and the caller
falls back to ``torch.load``: the arrays always hold exactly what
``torch.load(...)[key].numpy()`` gives (same dtype, shape, strides, bytes), read-only either
way. Zip CRCs are not checked: the caller has verified the whole file against its logged
SHA-256 already.
"""

from __future__ import annotations

import io
import pickle
import struct
from collections import OrderedDict
from typing import Any

import numpy as np

_STORAGE_DTYPES = {
    "DoubleStorage": np.float64,
    "FloatStorage": np.float32,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class UnsupportedTrajectory(Exception):
    """The file uses something this reader does not handle (``torch.load`` will)."""


class _Storage:
    __slots__ = ("dtype",)

    def __init__(self, dtype: Any) -> None:
        self.dtype = np.dtype(dtype)


def _rebuild_tensor(
    storage: np.ndarray, offset: int, size: tuple[int, ...], stride: tuple[int, ...],
    requires_grad: bool, hooks: Any, metadata: Any = None,
) -> np.ndarray:
    if requires_grad or hooks or metadata:
        raise UnsupportedTrajectory("a tensor with autograd state or metadata")
    shape = tuple(int(n) for n in size)
    expected, step = [], 1
    for n in reversed(shape):
        expected.append(step)
        step *= n
    count = step
    if count == 0:
        raise UnsupportedTrajectory("an empty tensor")  # torch gives it other strides
    if tuple(stride) != tuple(reversed(expected)):
        raise UnsupportedTrajectory("a non-contiguous tensor")
    if offset + count > storage.shape[0]:
        raise UnsupportedTrajectory("a tensor larger than its storage")
    return storage[offset : offset + count].reshape(shape)


class _Unpickler(pickle.Unpickler):
    def __init__(self, archive: _StoredZip, prefix: str) -> None:
        super().__init__(io.BytesIO(archive.read(f"{prefix}data.pkl")))
        self._records: dict[str, np.ndarray] = {}
        self._archive = archive
        self._prefix = prefix

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor
        if module == "collections" and name == "OrderedDict":
            return OrderedDict
        if module == "torch" and name in _STORAGE_DTYPES:
            return _Storage(_STORAGE_DTYPES[name])
        raise UnsupportedTrajectory(f"global {module}.{name}")

    def persistent_load(self, saved_id: Any) -> np.ndarray:
        if not (isinstance(saved_id, tuple) and len(saved_id) == 5 and saved_id[0] == "storage"):
            raise UnsupportedTrajectory("an unknown persistent id")
        _kind, storage_type, key, _location, numel = saved_id
        if not isinstance(storage_type, _Storage):
            raise UnsupportedTrajectory("an untyped storage")
        found = self._records.get(key)
        if found is None:
            dtype = storage_type.dtype
            start, size = self._archive.members[f"{self._prefix}data/{key}"]
            if size != int(numel) * dtype.itemsize:
                raise UnsupportedTrajectory(f"storage {key} has the wrong size")
            # A read-only view of the file's bytes (no copy); torch's storages are aligned.
            found = np.frombuffer(self._archive.buffer, dtype=dtype, count=int(numel),
                                  offset=start)
            if start % dtype.itemsize:
                found = found.copy()
                found.flags.writeable = False
            self._records[key] = found
        elif found.dtype != storage_type.dtype:
            raise UnsupportedTrajectory(f"storage {key} read with two dtypes")
        return found


_END = struct.Struct("<4s4H2LH")  # end of central directory
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # central directory entry
_LOCAL = struct.Struct("<4s2B4HL2L2H")  # local file header


class _StoredZip:
    """The members of a zip archive whose members are all stored (torch.save's layout), as
    slices of one buffer: no per-member file objects, no zip64, no compression."""

    def __init__(self, data: bytes) -> None:
        self.buffer = data
        self.data = memoryview(data)
        end = data.rfind(b"PK\x05\x06", max(0, len(data) - _END.size - 0xFFFF))
        if end < 0:
            raise UnsupportedTrajectory("not a zip archive")
        _sig, _disk, _first, _here, count, size, offset, _comment = _END.unpack_from(data, end)
        if offset == 0xFFFFFFFF or count == 0xFFFF:
            raise UnsupportedTrajectory("a zip64 archive")
        self.members: dict[str, tuple[int, int]] = {}
        position = offset
        for _ in range(count):
            entry = _CENTRAL.unpack_from(data, position)
            if entry[0] != b"PK\x01\x02":
                raise UnsupportedTrajectory("a broken zip directory")
            method, compressed, plain = entry[6], entry[10], entry[11]
            name_len, extra_len, comment_len, local = entry[12], entry[13], entry[14], entry[18]
            name = bytes(data[position + _CENTRAL.size : position + _CENTRAL.size + name_len])
            if method != 0 or compressed != plain or local == 0xFFFFFFFF:
                raise UnsupportedTrajectory("a compressed or zip64 member")
            header = _LOCAL.unpack_from(data, local)
            if header[0] != b"PK\x03\x04":
                raise UnsupportedTrajectory("a broken zip member")
            start = local + _LOCAL.size + header[10] + header[11]
            if start + plain > len(data):
                raise UnsupportedTrajectory("a truncated zip member")
            self.members[name.decode("utf-8")] = (start, plain)
            position += _CENTRAL.size + name_len + extra_len + comment_len

    def read(self, name: str) -> memoryview:
        start, size = self.members[name]
        return self.data[start : start + size]


def read_trajectory(data: bytes) -> dict[str, Any]:
    """The payload dict with numpy arrays for tensors (strings stay strings); raises
    :class:`UnsupportedTrajectory` for anything but a plain tensor dict. The arrays are
    read-only views of ``data``: the values torch.load gives, without a copy."""
    try:
        archive = _StoredZip(bytes(data))
        pickles = [n for n in archive.members if n.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise UnsupportedTrajectory("no single data.pkl")
        prefix = pickles[0][: -len("data.pkl")]
        order = archive.members.get(f"{prefix}byteorder")
        if order is not None and bytes(archive.read(f"{prefix}byteorder")) != b"little":
            raise UnsupportedTrajectory("big-endian storages")
        payload = _Unpickler(archive, prefix).load()
    except (pickle.UnpicklingError, struct.error, KeyError, ValueError, EOFError,
            TypeError, UnicodeDecodeError) as error:
        raise UnsupportedTrajectory(str(error)) from None
    if not isinstance(payload, dict):
        raise UnsupportedTrajectory("not a dict")
    return payload


def load_payload(data: bytes) -> dict[str, Any]:
    """:func:`read_trajectory`, or ``torch.load(weights_only=True)`` with tensors turned into
    numpy arrays when the file holds anything else."""
    try:
        return read_trajectory(data)
    except UnsupportedTrajectory:
        import torch

        payload = torch.load(io.BytesIO(data), weights_only=True)
        out = {k: v.numpy() if hasattr(v, "numpy") else v for k, v in payload.items()}
        for value in out.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False  # as read_trajectory's views
        return out
