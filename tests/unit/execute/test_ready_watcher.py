"""The readiness log watcher: markers and a failed bind found however the log's writes split the lines."""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Any, cast

from llmsweep.execute.ready import LogMarkerWatcher, bind_refusal, exit_text

LOG = ("Loading weights: 50%\rLoading weights: 100%\n"
       "INFO:     Application startup complete.\n"
       "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 38555): address already in use\n"
       "INFO:     Waiting for application shutdown.\n")


def test_a_failed_bind_and_a_marker_are_found_wherever_the_writes_split_them(tmp_path: Path) -> None:
    """uvicorn says `Application startup complete.` before its bind, then the bind's failure: the watcher reports
    both, whole, at any split of the writes, and keeps reading for the failure after a marker was found."""
    refusal = LOG.split("\n")[2]
    for cut in range(1, len(LOG)):
        log = tmp_path / f"server-{cut}.log"
        watcher = LogMarkerWatcher(log, ("Application startup complete.",))
        assert not watcher.check()  # no log yet
        log.write_text(LOG[:cut])
        watcher.check()
        with open(log, "a") as fh:
            fh.write(LOG[cut:])
        assert watcher.check() and watcher.found == "Application startup complete."
        assert watcher.refusal == refusal, cut


def test_a_bind_refusal_is_said_in_each_servers_words() -> None:
    """uvicorn's and aiohttp's EADDRINUSE, ZMQ's, and Docker's published port; a log without one has none."""
    assert bind_refusal("x\nzmq.error.ZMQError: Address already in use (addr='tcp://*:5557')\ny") == \
        "zmq.error.ZMQError: Address already in use (addr='tcp://*:5557')"
    assert bind_refusal("docker: Error response from daemon: ... Bind for 0.0.0.0:8000 failed: port is already "
                        "allocated.") is not None
    assert bind_refusal("INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)\n") is None


def test_the_readmes_example_of_a_dead_role_is_what_a_reason_says() -> None:
    """The README quoted `decode worker 0 on mn2 exited with status -9` (Python's status of a SIGKILLed child) long
    after reasons said how a signal ended it: its example is what `exit_text` prints (up to its `…`)."""
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    (example,) = re.findall(r"`(decode worker 0 on mn2 [^`]*)`", readme.replace("\n  ", " "))
    handle = types.SimpleNamespace(dead_role="decode worker 0 on mn2", returncode=-9, exit_cause=lambda: None)
    said = exit_text(cast(Any, handle))
    assert said.startswith(example.removesuffix("…)")), (example, said)
