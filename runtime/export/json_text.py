"""The JSON text of a dataset's metadata files: ``json.dumps(value, indent=4)`` byte for byte
(LeRobot's style), written by :func:`runtime.json_text.dataset_json`, which does it without
the standard library's pure-Python indenting encoder.
"""

from __future__ import annotations

import json
from typing import Any

from runtime.json_text import dataset_json

_EPISODE_TEXT: dict[str, str] = {}  # an episode's compact JSON -> its indented manifest text
_EPISODE_TEXT_LIMIT = 100_000
_EPISODES_TAIL = '    "episodes": []\n}\n'


def json_bytes(value: Any) -> bytes:
    """``json.dumps(value, indent=4, ensure_ascii=False, allow_nan=False) + "\\n"``."""
    return (dataset_json(value) + "\n").encode()


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """``json_bytes(manifest)``, byte for byte, without indenting every episode again: a
    live dataset rewrites the manifest after every batch, so each episode's text (its JSON
    at the list's depth) is remembered."""
    episodes = manifest.get("episodes")
    head = json_bytes({**manifest, "episodes": []}).decode()
    if not episodes or not head.endswith(_EPISODES_TAIL):
        return json_bytes(manifest)
    if len(_EPISODE_TEXT) > _EPISODE_TEXT_LIMIT:
        _EPISODE_TEXT.clear()
    parts = []
    for episode in episodes:
        key = json.dumps(episode, ensure_ascii=False, allow_nan=False)
        text = _EPISODE_TEXT.get(key)
        if text is None:
            text = json_bytes(episode).decode()[:-1]
            text = _EPISODE_TEXT[key] = text.replace("\n", "\n" + " " * 8)
        parts.append(text)
    body = ",\n        ".join(parts)
    return (head[: -len(_EPISODES_TAIL)] + '    "episodes": [\n        ' + body
            + "\n    ]\n}\n").encode()
