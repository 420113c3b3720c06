"""A second signal while `llmsweep` exits after the first: the interpreter's finalisation puts every handler back to
the default action, so a Ctrl-C (or SIGTERM, SIGQUIT) in the last few tenths of a second killed the process by that
signal (status -2, -15, -3 with a core file) instead of the 128 + first signal the run had decided and said."""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from test_run_support import cli_env, run_argv

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGQUIT], ids=["INT", "QUIT"])
def test_a_signal_after_the_interrupted_line_keeps_the_first_signals_status(tmp_path: Path,
                                                                             second: signal.Signals) -> None:
    proc = subprocess.Popen(run_argv(QUICKSTART, "--out", tmp_path / "out", "--no-report"), env=cli_env(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()

    def until(text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if text in lines.get(timeout=0.5):
                    return
            except queue.Empty:
                assert proc.poll() is None, f"the run exited ({proc.returncode}) before {text!r}"
        raise AssertionError(f"no {text!r} within {timeout} s")

    try:
        until("job 1/", 60)
        proc.send_signal(signal.SIGTERM)
        until("interrupted by SIGTERM", 60)
        while proc.poll() is None:  # the second signal, again and again, for as long as the process is exiting
            proc.send_signal(second)
            time.sleep(0.01)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
