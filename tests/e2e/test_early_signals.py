"""A signal while the command is still loading (its imports take a tenth of a second or more on a busy 2-core
machine) stops it as quietly as one mid-run: `interrupted by SIGINT`, exit 130 (143 for SIGTERM, 138 for SIGUSR1), no
traceback.

The test holds the load open deterministically: a stand-in `click` on PYTHONPATH (the command group's first import
that the entry point does not make) says it is loading, then sleeps until the signal lands."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

QUICKSTART = Path(__file__).parents[2] / "examples" / "quickstart.yaml"
STAND_IN = """import os, time
open(os.environ["LLMSWEEP_TEST_LOADING"], "w").close()
time.sleep(60)
"""


def _entry_points() -> list[list[str]]:
    points = [[sys.executable, "-m", "llmsweep"]]
    script = Path(sys.executable).parent / "llmsweep"  # the console script pip wrote from pyproject's entry point
    if script.is_file():
        points.append([str(script)])
    return points


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1], ids=lambda s: s.name)
def test_a_signal_while_the_command_loads_is_a_quiet_stop(tmp_path: Path, sig: signal.Signals) -> None:
    (tmp_path / "click").mkdir()
    (tmp_path / "click" / "__init__.py").write_text(STAND_IN)
    for n, argv in enumerate(_entry_points()):
        loading = tmp_path / f"loading-{n}"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
               "LLMSWEEP_TEST_LOADING": str(loading), "LLMSWEEP_STORE": str(tmp_path / "store.sqlite")}
        proc = subprocess.Popen([*argv, "run", str(QUICKSTART), "--out", str(tmp_path / f"out-{n}")],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 60
        while not loading.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the command never began loading its command group"
            time.sleep(0.01)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        assert (proc.returncode, err) == (128 + sig, f"interrupted by {sig.name}\n"), (argv, out)
        assert not (tmp_path / f"out-{n}").exists()
