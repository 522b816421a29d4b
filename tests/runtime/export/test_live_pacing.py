"""How a live dataset paces its builds: the GIL switch interval while one runs, and the minimum
interval between two (which `finish` does not wait for)."""

from __future__ import annotations

import sys

import pytest

from runtime.export.live import _BUILD_SWITCH_INTERVAL_S, _ShortSwitchInterval


def test_builds_shorten_the_switch_interval_and_restore_it() -> None:
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        with _ShortSwitchInterval():
            short = sys.getswitchinterval()
            assert short == pytest.approx(_BUILD_SWITCH_INTERVAL_S, rel=0.01)
            with _ShortSwitchInterval():  # a second session's build at the same time
                assert sys.getswitchinterval() == short
            assert sys.getswitchinterval() == short
        assert sys.getswitchinterval() == pytest.approx(0.005, rel=0.01)
        sys.setswitchinterval(0.0001)  # an application that chose a shorter one keeps it
        chosen = sys.getswitchinterval()  # (microsecond steps: not exactly 0.0001)
        with _ShortSwitchInterval():
            assert sys.getswitchinterval() == chosen
        assert sys.getswitchinterval() == chosen
    finally:
        sys.setswitchinterval(before)


def test_requests_within_the_interval_build_together_and_finish_builds_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    import time
    from pathlib import Path

    from runtime.export.dataset import DatasetSpec
    from runtime.export.live import LiveDatasets

    built: list[int] = []
    done = threading.Event()

    def fake_update(self: LiveDatasets, version: int) -> list:
        built.append(version)
        done.set()
        return [("DatasetUpdated", {"version": version})]

    monkeypatch.setattr(LiveDatasets, "_update", fake_update)
    live = LiveDatasets("run-x", [DatasetSpec("lerobot", Path("/nonexistent/x"))], store=None,
                        min_interval_s=60.0)
    try:
        live.request(1)
        assert done.wait(30)  # the session's first request is built at once
        live.request(2)
        live.request(3)
        time.sleep(0.3)
        assert built == [1]  # within the interval: waiting, and 2 and 3 will be one build
        start = time.monotonic()
        assert live.finish() == [("DatasetUpdated", {"version": 1}),
                                 ("DatasetUpdated", {"version": 3})]
        assert built == [1, 3] and time.monotonic() - start < 30
    finally:
        live.close()
