"""Know when a server is ready: its health endpoint answers 2xx and, when the adapter names markers, one appeared.

Health alone is not enough for some engines (SGLang answers /health before its warm-up request finishes), so the
adapter may name log markers; both must hold. A server that dies while starting, or never gets ready, fails with its
exit code and the last lines of its log, which is nearly always where the reason is.

Health alone also cannot tell whose server answers: another process on the port answers it just as well. So a
marker must be one the engine prints once its socket is bound (uvicorn's `Uvicorn running on`, not its `Application
startup complete.`, which it prints before binding and even when the bind fails: `catalog/data/engines.yaml`); and a
log that says the server could not bind an address (`bind_refusal`) fails the launch, whatever answers the port.
(`/version` is no tell: a real engine's names no engine, and the CPU rehearsals' stand-in for vLLM is the simulator.)
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
from dataclasses import dataclass
from pathlib import Path

from llmsweep.direct import DIRECT
from llmsweep.errors import LaunchError
from llmsweep.execute.failure_text import log_tail
from llmsweep.execute.handle import DEFAULT_TAIL_LINES, ServerHandle
from llmsweep.execute.signals import exit_said

log = logging.getLogger(__name__)

_PROBE_TIMEOUT_S = 5.0


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


def served_context(url: str, model: str | None, timeout_s: float = _PROBE_TIMEOUT_S) -> int | None:
    """The context length a launched server reports for the model it serves, read from `{url}/v1/models` as
    `client.probe.model_context` reads it; None when it does not answer. Best effort: never a failure."""
    from llmsweep.client.probe import model_context

    try:
        with DIRECT.open(f"{url}/v1/models", timeout=timeout_s) as resp:
            doc = json.loads(resp.read().decode() or "{}")
    except (OSError, ValueError) as exc:
        log.info("could not read %s/v1/models: %s", url, exc)
        return None
    return model_context(doc, model)


def probe_health(url: str, timeout_s: float = _PROBE_TIMEOUT_S) -> int | None:
    """HTTP status of GET `url`, or None when nothing answers. Synchronous on purpose: it runs between launches."""
    try:
        with DIRECT.open(url, timeout=timeout_s) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError, ValueError):
        return None


BIND_REFUSALS = ("address already in use", "port is already allocated")
"""How a log says a server could not bind an address another process holds (EADDRINUSE: uvicorn's, aiohttp's,
ZMQ's and torch's words alike; Docker's for a published port), lower-cased."""

_CARRY_MAX = 4096
"""Of a log line not yet ended, the most a watcher keeps for its next read (a progress bar may never end its line);
longer than any marker and than the words of a refusal."""


def bind_refusal(text: str) -> str | None:
    """The first line of `text` that says an address could not be bound (`BIND_REFUSALS`), stripped; None when
    none does."""
    lowered = text.lower()
    at = min((i for i in (lowered.find(w) for w in BIND_REFUSALS) if i >= 0), default=-1)
    if at < 0:
        return None
    start = max(text.rfind("\n", 0, at), text.rfind("\r", 0, at)) + 1
    ends = [i for i in (text.find("\n", at), text.find("\r", at)) if i >= 0]
    return text[start:min(ends, default=len(text))].strip()


class LogMarkerWatcher:
    """Reads a growing log incrementally and remembers whether any marker has appeared, and the first line that says
    the server could not bind an address (`refusal`), even across read boundaries."""

    def __init__(self, path: Path, markers: tuple[str, ...]) -> None:
        self._path = path
        self._markers = markers
        self._offset = 0
        self._carry = ""
        self.found: str | None = None
        self.refusal: str | None = None

    def check(self) -> bool:
        """Read what the log gained; True once a marker appeared (at once when there are none)."""
        try:
            with open(self._path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            data = b""
        self._offset += len(data)
        text = self._carry + data.decode("utf-8", errors="replace")
        if self.found is None:
            self.found = next((m for m in self._markers if m in text), None)
        if self.refusal is None:
            self.refusal = bind_refusal(text)
        # markers and refusals lie within a line: what follows its last line break is all the next read needs
        tail = text[max(text.rfind("\n"), text.rfind("\r")) + 1:]
        self._carry = tail[-_CARRY_MAX:]
        return self.found is not None or not self._markers


@dataclass(frozen=True)
class Readiness:
    """How the server became ready, for the run's log and provenance."""

    seconds: float
    health_status: int
    marker: str | None


def _failure(handle: ServerHandle, what: str, fix: str, tail_lines: int) -> LaunchError:
    body = log_tail(tail_lines, handle.log_path, handle.tail(tail_lines))
    return LaunchError(f"{handle.spec.engine} server {what}{body}", fix=fix)


_REFUSED_EXIT_S = 5.0
"""How long a server whose log says it could not bind an address is given to exit on its own before it is stopped:
uvicorn exits with status 3 right after saying so, but `transformers serve` lived on ~3 s more while its batching
thread stopped (5.17.0 on the CPU; long enough to be benchmarked on another server's port), and a process a
non-daemon thread holds may never exit."""


def _exited(handle: ServerHandle, url: str, tail_lines: int, refusal: str | None = None) -> LaunchError:
    """A server that died before it was ready: how it ended, with what ended it where its launcher can tell
    (`exit_cause`: docker's daemon, an OOM kill while the weights load), as `exit_text` says a death mid-job."""
    said = [cause] if (cause := handle.exit_cause()) else []
    if refusal:
        said.append(f"it could not bind an address another process holds ({refusal})")
    return _failure(
        handle,
        f"{_ended(handle)} while starting (health {url})" + (f": {'; '.join(said)}" if said else ""),
        # the launcher's own reading of this exit (docker's 125) first
        fix=handle.exit_fix(tail_lines)
            or (_refused_fix(handle) if refusal else
                "read the log tail above; fix the engine arguments, model path or image"
                + (f", or {handle.user_flags}" if handle.user_flags else "") + ", and rerun"),
        tail_lines=tail_lines,
    )


def _refused_fix(handle: ServerHandle) -> str:
    port = handle.spec.port
    return (f"stop what holds the address (port {port}: `ss -ltnp 'sport = :{port}'` names it), or delete the "
            "recipe's `serve.port` so llmsweep picks a free port, and rerun")


def _refused(handle: ServerHandle, url: str, refusal: str, tail_lines: int) -> LaunchError:
    """A server whose log says it could not bind an address: never ready, whatever answers its port. Given a moment
    to exit on its own; one that lives on is stopped, so its failure is the exit it is (a launch on a port llmsweep
    picked that exits so is relaunched on a fresh one: `lifecycle.lost_port_race`)."""
    deadline = time.monotonic() + _REFUSED_EXIT_S
    while handle.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    if not handle.is_alive():
        return _exited(handle, url, tail_lines, refusal)
    handle.stop()
    return _failure(
        handle,
        f"could not bind an address another process holds ({refusal}) and did not exit; stopped it (exit status "
        f"{handle.returncode}): whatever answers {url} is not this server",
        fix=_refused_fix(handle), tail_lines=tail_lines)


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
        if not handle.is_alive():  # (the tail once the log has settled: what it said last)
            raise _exited(handle, url, tail_lines, markers.refusal or bind_refusal(handle.tail(tail_lines)))
        marker_ok = markers.check()
        if markers.refusal is not None:
            raise _refused(handle, url, markers.refusal, tail_lines)
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
    """How a dead server exited: `exit status N: <cause>` where the launcher can tell what ended it (docker's daemon),
    else `it exited with status N` or the signal that killed it (`signals.exit_said`); for a role-by-role deployment,
    which role and where (`decode worker 0 on mn2 was killed by SIGKILL …`: the deployment's own name says nothing
    of which one died)."""
    who = handle.dead_role
    why = handle.exit_cause()
    if why:
        said = f"{who} exited with status {handle.returncode}" if who else f"exit status {handle.returncode}"
        return f"{said}: {why}"
    return f"{who or 'it'} {_ended(handle)}"


def _ended(handle: ServerHandle) -> str:
    """`exited with status N`, or the signal that ended the server (`signals.exit_said`) where its launcher cannot
    tell more (docker's daemon, whose cause the caller gives)."""
    return f"exited with status {handle.returncode}" if handle.exit_cause() else exit_said(handle.returncode)


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
