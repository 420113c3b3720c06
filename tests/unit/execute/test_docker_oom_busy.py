"""A container's own State names an OOM kill even when the daemon is too busy to answer the first `inspect` in time:
the suite's busy-daemon test once got "the OOM killer or a kill from outside" because one `docker container inspect`
timed out (`_INSPECT_TIMEOUT_S`) and the State was never read. The daemon is asked once more; a container that is gone
is not asked again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from llmsweep.execute import docker

OOM_STATE = {"OOMKilled": True, "Running": False, "ExitCode": 137}


def _handle(monkeypatch: pytest.MonkeyPatch, answers: list[Any]) -> tuple[docker.DockerServerHandle, list[Any]]:
    """A handle whose daemon answers `inspect` with `answers` in turn (what was asked is kept)."""
    handle = object.__new__(docker.DockerServerHandle)
    replies: Iterator[Any] = iter(answers)
    asked: list[Any] = []

    def inspect() -> Any:
        asked.append(reply := next(replies))
        return reply

    monkeypatch.setattr(handle, "_inspect_state", inspect)
    monkeypatch.setattr(docker, "_EVENTS_LAG_S", 0.0)
    return handle, asked


def test_an_oom_kill_is_read_though_the_daemon_did_not_answer_the_first_inspect(
        monkeypatch: pytest.MonkeyPatch) -> None:
    handle, asked = _handle(monkeypatch, [None, OOM_STATE])
    assert handle._oom_killed() == f"{docker._OOM}: the kernel's OOM killer ended it (the container's State.OOMKilled)"
    assert asked == [None, OOM_STATE]


def test_a_daemon_silent_twice_or_a_container_gone_gives_no_oom_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    silent, asked = _handle(monkeypatch, [None, None, OOM_STATE])
    assert silent._oom_killed() is None and asked == [None, None]
    gone, asked = _handle(monkeypatch, [docker._NO_SUCH, OOM_STATE])
    assert gone._oom_killed() is None and asked == [docker._NO_SUCH]
