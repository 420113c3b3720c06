"""Fixtures shared by the execute room's tests."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator

import pytest

from llmsweep.execute import signals


@pytest.fixture
def installed() -> Iterator[None]:
    """The CLI's handlers, as `llmsweep` installs them, for one test; the previous ones back afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in signals.INTERRUPT_SIGNALS}
    hook = sys.unraisablehook
    signals.reset()
    signals.install()
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        sys.unraisablehook = hook
        signals.reset()
