"""Canonical JSON: the one byte representation used for digests and stored payloads.

Digests must not depend on dict order, whitespace or float formatting quirks, and
NaN/Infinity must never sneak into a ledger that other tools will parse.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Bound once: ``json.dumps`` with non-default options builds a fresh encoder per call,
# which is a large share of the cost of serializing small ledger payloads.
_ENCODE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode


def canonical_json(value: Any) -> str:
    """Serialize with sorted keys, compact separators and no NaN."""
    return _ENCODE(value)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(value: Any) -> str:
    """Digest of the canonical JSON form of ``value``."""
    return sha256_hex(canonical_json(value).encode("utf-8"))
