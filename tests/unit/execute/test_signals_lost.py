"""A first signal whose Interrupted is raised while the interpreter runs a finalizer is not lost."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from llmsweep.execute import signals


def test_an_interrupt_a_finalizer_swallowed_is_raised_again_in_the_runs_own_code() -> None:
    """Seen in a full test run: SIGINT landed while a WeakValueDictionary callback ran, Python printed 'Exception
    ignored in …' and dropped the Interrupted, and the first signal being spent, the sweep ran on to exit 0."""

    class Finalised:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGINT)  # delivered while this finalizer runs
            sum(range(1000))  # bytecode for the handler to run in

    saved = {sig: signal.getsignal(sig) for sig in signals.INTERRUPT_SIGNALS}
    hook = sys.unraisablehook
    signals.reset()
    signals.install()
    try:
        with pytest.raises(signals.Interrupted) as caught:
            Finalised()  # dropped at once: its __del__ runs here
            time.sleep(5)  # the run's own code, where the interrupt lands now (at once: the sleep is cut short)
        assert caught.value.signum == signal.SIGINT
        assert signals.received() == [signal.SIGINT] and not signals.hurried()  # one signal, not two
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        sys.unraisablehook = hook
        signals.reset()
