"""Logging configuration: key=value text by default, JSON lines with --log-json, levels."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from runtime.logging import LogLevelError, configure_logging


@pytest.fixture(autouse=True)
def _reset_structlog():
    yield
    structlog.reset_defaults()
    for handler in list(logging.getLogger().handlers):
        if getattr(handler, "_assetcast", False):
            logging.getLogger().removeHandler(handler)


def test_json_lines_carry_event_level_and_fields() -> None:
    stream = io.StringIO()
    configure_logging(level="info", json_lines=True, stream=stream)
    structlog.get_logger("t").info("batch_started", batch_index=3)
    structlog.get_logger("t").debug("hidden")
    [line] = stream.getvalue().splitlines()
    record = json.loads(line)
    assert record["event"] == "batch_started"
    assert record["batch_index"] == 3
    assert record["level"] == "info"
    assert "timestamp" in record


def test_plain_key_value_without_colors_when_not_a_tty() -> None:
    stream = io.StringIO()
    configure_logging(level="debug", stream=stream)
    structlog.get_logger("t").debug("episode_judged", accepted=True)
    text = stream.getvalue()
    assert "episode_judged" in text and "accepted=True" in text
    assert "\x1b[" not in text


def test_level_filters_and_stdlib_logs_follow_the_format() -> None:
    stream = io.StringIO()
    configure_logging(level="warning", json_lines=True, stream=stream)
    structlog.get_logger("t").info("quiet")
    logging.getLogger("alembic.x").warning("from stdlib")
    [line] = stream.getvalue().splitlines()
    assert json.loads(line)["event"] == "from stdlib"


def test_unknown_level_is_bad_input() -> None:
    with pytest.raises(LogLevelError, match=r"^--log-level: unknown level 'loud'"):
        configure_logging(level="loud")
