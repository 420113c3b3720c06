"""Know when a server is ready: its health endpoint answers 2xx and, when the adapter names markers, one appeared.

Health alone is not enough for some engines (SGLang answers /health before its warm-up request finishes), so the
adapter may name log markers; both must hold. A server that dies while starting, or never gets ready, fails with its
exit code and the last lines of its log, which is nearly always where the reason is.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from llmsweep.errors import LaunchError
from llmsweep.execute.failure_text import log_tail
from llmsweep.execute.handle import DEFAULT_TAIL_LINES, ServerHandle

log = logging.getLogger(__name__)

_PROBE_TIMEOUT_S = 5.0
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Every request to a server this run launched goes direct: with HTTP_PROXY set (a CI box, a cluster login node),
plain `urlopen` would send the health check or the `/version` read-back to the proxy."""


def server_version(url: str, timeout_s: float = _PROBE_TIMEOUT_S) -> dict[str, object]:
    """What a launched server says about itself at `{url}/version` (engine version, role, node, tp, the simulator's
    calibration); empty when it does not answer or answers something else. Best effort: never a failure."""
    try:
        with DIRECT.open(f"{url}/version", timeout=timeout_s) as resp:
            doc = json.loads(resp.read().decode() or "{}")
    except (OSError, ValueError) as exc:
        log.info("could not read %s/version: %s", url, exc)
        return {}
    return doc if isinstance(doc, dict) else {}


def probe_health(url: str, timeout_s: float = _PROBE_TIMEOUT_S) -> int | None:
    """HTTP status of GET `url`, or None when nothing answers. Synchronous on purpose: it runs between launches."""
    try:
        with DIRECT.open(url, timeout=timeout_s) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError, ValueError):
        return None


class LogMarkerWatcher:
    """Reads a growing log incrementally and remembers whether any marker has appeared, even across read boundaries."""

    def __init__(self, path: Path, markers: tuple[str, ...]) -> None:
        self._path = path
        self._markers = markers
        self._offset = 0
        self._carry = ""
        self.found: str | None = None
        self._keep = max((len(m) for m in markers), default=1) - 1

    def check(self) -> bool:
        if not self._markers:
            return True
        if self.found is not None:
            return True
        try:
            with open(self._path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return False
        self._offset += len(data)
        text = self._carry + data.decode("utf-8", errors="replace")
        for marker in self._markers:
            if marker in text:
                self.found = marker
                return True
        self._carry = text[-self._keep :] if self._keep else ""
        return False


@dataclass(frozen=True)
class Readiness:
    """How the server became ready, for the run's log and provenance."""

    seconds: float
    health_status: int
    marker: str | None


def _failure(handle: ServerHandle, what: str, fix: str, tail_lines: int) -> LaunchError:
    body = log_tail(tail_lines, handle.log_path, handle.tail(tail_lines))
    return LaunchError(f"{handle.spec.engine} server {what}{body}", fix=fix)


def wait_ready(
    handle: ServerHandle,
    *,
    timeout_s: float | None = None,
    poll_s: float = 1.0,
    tail_lines: int = DEFAULT_TAIL_LINES,
) -> Readiness:
    """Block until the server is ready; raise :class:`LaunchError` with the log tail if it dies or times out.

    `timeout_s` defaults to the spec's `startup_timeout_s` (real engines take minutes: compile, CUDA graphs).
    """
    spec = handle.spec
    limit = spec.startup_timeout_s if timeout_s is None else timeout_s
    url = f"{handle.base_url}{spec.health_path}"
    markers = LogMarkerWatcher(handle.log_path, spec.ready_log_markers)
    started = time.monotonic()
    status: int | None = None
    while True:
        if not handle.is_alive():
            raise _failure(
                handle,
                f"exited with status {handle.returncode} while starting (health {url})",
                # the launcher's own reading of this exit (docker's 125) first
                fix=handle.exit_fix(tail_lines)
                    or "read the log tail above; fix the engine arguments, model path or image"
                    + (f", or {handle.user_flags}" if handle.user_flags else "") + ", and rerun",
                tail_lines=tail_lines,
            )
        marker_ok = markers.check()
        status = probe_health(url, timeout_s=min(_PROBE_TIMEOUT_S, max(poll_s, 1.0)))
        if status is not None and 200 <= status < 300 and marker_ok:
            elapsed = time.monotonic() - started
            log.info("%s ready after %.1f s (health %d, marker %r)", spec.engine, elapsed, status, markers.found)
            return Readiness(seconds=elapsed, health_status=status, marker=markers.found)
        elapsed = time.monotonic() - started
        if elapsed >= limit:
            got = "no answer" if status is None else f"HTTP {status}"
            wanted = f" and none of the markers {list(spec.ready_log_markers)} in the log" if not marker_ok else ""
            raise _failure(
                handle,
                f"not ready after {limit:g} s: {url} gave {got}{wanted}",
                fix="raise the recipe's `serve.health-timeout` (or `--startup-timeout`) if the engine is merely slow "
                "(first compile, large weights); otherwise read the log tail for the hang",
                tail_lines=tail_lines,
            )
        time.sleep(min(poll_s, max(0.0, limit - elapsed)))


def exit_text(handle: ServerHandle) -> str:
    """How a dead server exited: `exit status N`; for a role-by-role deployment, which role, where, and its status
    (`decode worker 0 on mn2 exited with status -9`: the deployment's own name says nothing of which one died)."""
    who = handle.dead_role
    said = f"{who} exited with status {handle.returncode}" if who else f"exit status {handle.returncode}"
    why = handle.exit_cause()  # what ended it, where the launcher can tell (docker's daemon)
    return f"{said}: {why}" if why else said


def check_alive(handle: ServerHandle, *, during: str, tail_lines: int = DEFAULT_TAIL_LINES) -> None:
    """Raise :class:`LaunchError` with the log tail when the server has died, e.g. after the client finished.

    A client that ran against a server which died half-way may still exit 0 with fewer results: a failure that looks
    green. The lifecycle calls this after (and may call it during) the benchmark.
    """
    if not handle.is_alive():
        raise _failure(
            handle,
            f"died during {during} ({exit_text(handle)})",
            fix="read the log tail above (out of memory, NCCL error, crash); results of this job are not valid",
            tail_lines=tail_lines,
        )
