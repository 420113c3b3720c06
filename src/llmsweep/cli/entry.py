"""The `llmsweep` console script and `python -m llmsweep`.

Interrupt signals are taken before the command group loads: its imports take a tenth of a second or more on a busy
2-core machine, and a Ctrl-C (or SIGTERM, SIGHUP) in that time was a KeyboardInterrupt traceback out of an import
(SIGTERM: death by signal, with no word). Now it is the same quiet stop as later: `interrupted by SIGINT`, exit
128 + the signal. Only the interpreter's own start-up remains before this module runs.
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> Any:
    from llmsweep.execute import signals

    signals.install()
    try:
        from llmsweep.cli.main import main as command
    except KeyboardInterrupt as exc:  # signals' Interrupted, raised while the command group was loading
        sys.stderr.write(signals.interrupted_by(signals.first_signal(exc)) + "\n")
        signals.hold_while_exiting()
        sys.exit(signals.exit_code(exc))
    try:
        return command()
    except SystemExit:  # the status is decided: a signal from here on must not replace it (`hold_while_exiting`)
        signals.hold_while_exiting()
        raise
