"""A server that dies at once has its last words in the failure: the log tail waits for the log pump to copy what
the pipe still holds once the root has exited (it read an empty log about one time in three)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import LaunchError
from llmsweep.execute.local import LocalLauncher
from llmsweep.execute.ready import wait_ready


@pytest.mark.parametrize("attempt", range(5))
def test_a_server_that_exits_at_once_names_its_reason_in_the_failure(tmp_path: Path, attempt: int) -> None:
    spec = LaunchSpec(engine="vllm", argv=("sh", "-c", "echo 'error: unrecognized arguments: --bogus' >&2; exit 2"),
                      port=9, gpus=0)
    handle = LocalLauncher().launch(spec, log_path=tmp_path / "log", environ={"PATH": os.environ["PATH"]})
    try:
        with pytest.raises(LaunchError) as err:
            wait_ready(handle, timeout_s=20, poll_s=0.05)
    finally:
        handle.stop(grace_s=1)
    assert "exited with status 2 while starting" in err.value.message
    assert "unrecognized arguments: --bogus" in err.value.message, err.value.message


def test_the_wait_for_the_log_is_bounded_when_a_descendant_keeps_the_pipe(tmp_path: Path) -> None:
    """The root exits, its background child holds the pipe open: the tail is read after at most about a second."""
    spec = LaunchSpec(engine="vllm", argv=("sh", "-c", "echo said; sleep 30 & exit 3"), port=9, gpus=0)
    handle = LocalLauncher().launch(spec, log_path=tmp_path / "log", environ={"PATH": os.environ["PATH"]})
    try:
        while handle.process.returncode is None:
            time.sleep(0.02)
        began = time.monotonic()
        tail = handle.tail()
        assert time.monotonic() - began < 3.0
        assert "said" in tail
    finally:
        handle.stop(grace_s=1)
