"""Rows as a backend hands them over, and the one decoder every path reads them with.

Folding, reading, snapshot rebuilding and the chain checks all decode stored payloads through
:func:`stored_payload`, so a log written by other means is refused the same way wherever it
is met, never misread.
"""

from __future__ import annotations

import json
from datetime import datetime

from domain.chain import GENESIS
from domain.errors import EventSchemaError
from domain.events import validate_payload

FoldRow = tuple[int, str, str, int, str | None]  # seq, type, payload text, schema_version, hash
# position, seq, type, payload (JSON text), recorded_at (aware UTC), schema_version
ReadRow = tuple[int, int, str, str, datetime, int]


def stored_payload(
    run_id: str, seq: int, event_type: str, text: str, schema_version: int
) -> dict:
    """Parse and validate one stored payload: a log written by other means is refused,
    never misread, whether it is folded or read."""
    try:
        try:
            payload = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise EventSchemaError(
                f"run {run_id!r} seq {seq} {event_type}: payload is not valid JSON: {exc}"
            ) from exc
        validate_payload(
            event_type, payload, schema_version=schema_version, run_id=run_id, seq=seq
        )
    except EventSchemaError as error:
        error.run_id, error.seq = run_id, seq
        raise
    return payload


class PreparedEvent:
    """An event validated for appending: its JSON payload, canonical text and, once the
    append has chosen its time, its place in the hash chain."""

    __slots__ = ("seq", "type", "payload", "text", "prev_hash", "hash")

    def __init__(self, seq: int, event_type: str, payload: dict, text: str) -> None:
        self.seq = seq
        self.type = event_type
        self.payload = payload
        self.text = text
        self.prev_hash = GENESIS
        self.hash = GENESIS
