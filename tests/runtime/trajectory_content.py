"""What two runs of one task and seed must share: their trajectories' content.

A trajectory names its run (``metadata.run_id``), so files of two different runs differ in
that and only that; a resumed run keeps its own id and writes byte-identical files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def content_digest(path: Path) -> str:
    """SHA-256 over the arrays and the metadata without ``run_id``."""
    import torch

    payload = torch.load(path, weights_only=True)
    digest = hashlib.sha256()
    for key in sorted(payload):
        value = payload[key]
        if key == "metadata":
            metadata = json.loads(value)
            metadata.pop("run_id")
            digest.update(json.dumps(metadata, sort_keys=True).encode())
        else:
            digest.update(key.encode() + value.numpy().tobytes())
    return digest.hexdigest()
