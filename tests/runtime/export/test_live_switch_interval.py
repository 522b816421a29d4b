"""A live build lowers the interpreter's GIL switch interval while it runs and restores it."""

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
