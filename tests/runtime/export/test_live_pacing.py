"""How a live dataset paces its builds: the GIL switch interval while one runs, and the minimum
interval between two (which `finish` does not wait for): a fixed floor, and a multiple of the
last build's duration so builds never take more than their share of the collection."""

from __future__ import annotations

import sys

import pytest

from runtime.export.live import _BUILD_SWITCH_INTERVAL_S, _ShortSwitchInterval
from runtime.export.live_builders import Built


def _instant_builds(monkeypatch: pytest.MonkeyPatch, min_interval_s: float) -> tuple:
    """A LiveDatasets whose builds take no time; the versions built, and a semaphore
    released once per build."""
    import threading
    from pathlib import Path

    from runtime.export.dataset import DatasetSpec
    from runtime.export.live import LiveDatasets

    built: list[int] = []
    finished = threading.Semaphore(0)

    def fake_update(self: LiveDatasets, version: int) -> Built:
        built.append(version)
        finished.release()
        return Built([("DatasetUpdated", {"version": version})], 0.001, 0.001)

    monkeypatch.setattr(LiveDatasets, "_update", fake_update)
    live = LiveDatasets("run-x", [DatasetSpec("lerobot", Path("/nonexistent/x"))], store=None,
                        min_interval_s=min_interval_s)
    return live, built, finished


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
    import time

    live, built, finished = _instant_builds(monkeypatch, min_interval_s=60.0)
    try:
        live.request(1)
        assert finished.acquire(timeout=30)  # the session's first request is built at once
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


def test_a_slow_build_waits_in_proportion_to_its_duration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    import time
    from pathlib import Path

    from runtime.export.dataset import DatasetSpec
    from runtime.export.live import LiveDatasets

    started: list[float] = []
    ended: list[float] = []
    first, second = threading.Event(), threading.Event()

    def slow_update(self: LiveDatasets, version: int) -> Built:
        started.append(time.monotonic())
        first.set()
        time.sleep(0.2)
        ended.append(time.monotonic())
        if len(started) == 2:
            second.set()
        # The builder's own measure of the build (here: all of it) sets the pause.
        return Built([("DatasetUpdated", {"version": version})], ended[-1] - started[-1], 0.0)

    monkeypatch.setattr(LiveDatasets, "_update", slow_update)
    live = LiveDatasets("run-x", [DatasetSpec("lerobot", Path("/nonexistent/x"))], store=None,
                        min_interval_s=0.0, max_duty=0.25)  # idle >= 3x the last build
    try:
        live.request(1)
        assert first.wait(30)
        live.request(2)  # arrives while the first build runs
        assert second.wait(30)
        assert started[1] - ended[0] >= 3 * (ended[0] - started[0]) - 0.01
        assert live.finish() == [("DatasetUpdated", {"version": 1}),
                                 ("DatasetUpdated", {"version": 2})]
    finally:
        live.close()


def test_a_duty_outside_zero_to_one_is_refused() -> None:
    from pathlib import Path

    from runtime.export.dataset import DatasetSpec
    from runtime.export.live import LiveDatasets

    with pytest.raises(ValueError, match=r"max_duty must be in \(0, 1\], not 0"):
        LiveDatasets("run-x", [DatasetSpec("lerobot", Path("/nonexistent/x"))], store=None,
                     max_duty=0)


def test_a_catch_up_request_is_built_without_waiting_out_the_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live, built, finished = _instant_builds(monkeypatch, min_interval_s=600.0)
    try:
        live.request(1)
        assert finished.acquire(timeout=30)
        live.request(2)  # paced: would wait ten minutes
        live.request(3, catch_up=True)  # the last batch started: build what piled up now
        assert finished.acquire(timeout=30)
        assert built == [1, 3]
        live.request(4)  # the catch-up is spent: pacing again
        assert not finished.acquire(timeout=0.3)
        assert built == [1, 3]
        assert live.finish()[-1] == ("DatasetUpdated", {"version": 4})
    finally:
        live.close()
