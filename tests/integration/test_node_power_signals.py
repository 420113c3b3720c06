"""A node's power sampler (`python -m llmsweep.execute.node_power`, one per role of a role-by-role run) stops at once
when a second stop signal lands while it handles the first, and still writes its node's file whole.

A teardown signals a sampler twice (SIGTERM to its process group, then to the process itself); on a loaded machine
the second landed while the handler ran. The handler was `threading.Event.set`, which takes the Event's lock: the
second handler, run inside the first, waited for that lock forever. The sampler hung until SIGKILL after the whole
grace period (15 s at Ctrl-C, 5 s per sampler at `--resume`), and its node's file missed its final write. Here the
second signal is sent exactly then: from a profile hook, right after the handler (or anything it calls) takes a lock.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import sim_serve

from llmsweep.execute.node_power import READY_LINE
from llmsweep.power.samples import GPU_METRICS_FILE

pytestmark = pytest.mark.timeout(120)

# The sampler, run with a hook that sends it SIGTERM again just after the running stop handler took a lock.
SAMPLER = """
import os, signal, sys
from llmsweep.execute import node_power

def in_handler(frame):
    codes = {getattr(signal.getsignal(s), "__code__", None) for s in (signal.SIGTERM, signal.SIGINT)} - {None}
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False

sent = []

def hook(frame, event, arg):
    if (event == "c_return" and not sent and getattr(arg, "__name__", "") in ("acquire", "__enter__")
            and in_handler(frame)):
        sent.append(True)
        os.kill(os.getpid(), signal.SIGTERM)

sys.setprofile(hook)
sys.exit(node_power.main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    """A simulator served over loopback: the sampler reads its `/power`."""
    with sim_serve("--model", "llama-3.1-8b", "--tp", "8") as url:
        yield url


@pytest.mark.parametrize("teardown", ["second-inside-the-handler", "back-to-back"])
def test_a_second_stop_signal_during_the_first_ones_handling_stops_the_sampler_at_once(
        tmp_path: Path, sim_url: str, teardown: str) -> None:
    """`second-inside-the-handler`: the hook sends the second SIGTERM just after the handler took a lock (the old
    handler's deadlock; the new one takes none, so there it is one signal). `back-to-back`: the teardown's two
    SIGTERMs (group, then process) and a Ctrl-C's SIGINT, sent at once, as they land on a loaded machine."""
    node = tmp_path / "prefill0"
    program = ["-c", SAMPLER] if teardown == "second-inside-the-handler" else ["-m", "llmsweep.execute.node_power"]
    proc = subprocess.Popen([sys.executable, *program, "--dir", str(node), "--gpus", "8", "--backend", "sim",
                             "--url", sim_url], stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        ready = proc.stderr.readline()
        assert READY_LINE in ready, ready + proc.stderr.read()
        time.sleep(0.6)  # a flush or two of samples first
        proc.send_signal(signal.SIGTERM)
        if teardown == "back-to-back":
            proc.send_signal(signal.SIGTERM)
            proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the sampler hung on stop signals ({teardown})")
        assert rc == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = (node / GPU_METRICS_FILE).read_text().splitlines()
    assert len(lines) >= 2 and all(json.loads(line) for line in lines)  # the header and samples, written whole
