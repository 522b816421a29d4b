"""Lease timing comes from the environment (tests shorten it) and is checked."""

from __future__ import annotations

import pytest

from domain.errors import AssetcastInputError
from runtime.session import HEARTBEAT_ENV, TTL_ENV, LeaseTiming, Session
from store import InMemoryEventStore


def test_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TTL_ENV, raising=False)
    monkeypatch.delenv(HEARTBEAT_ENV, raising=False)
    assert LeaseTiming.resolve() == LeaseTiming(30.0, 10.0)
    monkeypatch.setenv(TTL_ENV, "3")
    assert LeaseTiming.resolve() == LeaseTiming(3.0, 1.0)
    monkeypatch.setenv(HEARTBEAT_ENV, "0.5")
    assert LeaseTiming.resolve() == LeaseTiming(3.0, 0.5)
    assert LeaseTiming.resolve(ttl_s=8.0) == LeaseTiming(8.0, 0.5)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (TTL_ENV, "soon", f"{TTL_ENV}: expected a positive number of seconds, got 'soon'"),
        (TTL_ENV, "-1", f"{TTL_ENV}: expected a positive number of seconds, got '-1'"),
        (HEARTBEAT_ENV, "inf", "ASSETCAST_LEASE_HEARTBEAT_S: expected a positive number of "
                               "seconds, got 'inf'"),
        (HEARTBEAT_ENV, "20", "ASSETCAST_LEASE_HEARTBEAT_S: heartbeat 20 s must be at most half "
                              "the lease TTL 30 s"),
    ],
)
def test_bad_timing_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.delenv(TTL_ENV, raising=False)
    monkeypatch.delenv(HEARTBEAT_ENV, raising=False)
    monkeypatch.setenv(name, value)
    with pytest.raises(AssetcastInputError) as refused:
        LeaseTiming.resolve()
    assert str(refused.value) == message


def test_a_session_carries_its_token_and_tag() -> None:
    store = InMemoryEventStore()
    with Session.open(store, "r", ttl_s=30) as first:
        assert first.token == 1 and first.tag == f"{first.session_id}.1"
        first.check()
    with Session.open(store, "r", ttl_s=30) as second:
        assert second.token == 2
    assert store.lease_info("r") is None
