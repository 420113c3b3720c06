"""What a command says on stderr while work with no progress of its own runs long: `saying(WHAT)`.

A command that reads or writes a whole store or file in one call (`results export` of a large store, `results import`
of a large export: seconds per thousand results) printed nothing until it ended. Within `saying`, a block that has not
ended after `SLOW_S` seconds says `[HH:MM:SS] WHAT…` on stderr, and again every `EVERY_S` with how long it has run;
quick work says nothing, and stdout (a `--json` document, an export) is never touched.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import click

SLOW_S = 2.0
"""Seconds of work after which the command says what it is doing."""
EVERY_S = 30.0
"""Seconds between the lines that say it is still at it."""


def _say(line: str) -> None:
    click.echo(f"[{time.strftime('%H:%M:%S')}] {line}", err=True)


@contextlib.contextmanager
def saying(what: str) -> Iterator[None]:
    """Say `what` on stderr if the block runs past `SLOW_S`, then every `EVERY_S` with the time it has taken."""
    done = threading.Event()
    start = time.monotonic()

    def watch() -> None:
        if done.wait(SLOW_S):
            return
        _say(f"{what}…")
        while not done.wait(EVERY_S):
            _say(f"{what}… ({time.monotonic() - start:.0f} s so far)")

    thread = threading.Thread(target=watch, name="cli-notice", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
