"""The interrupt signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, ...: every one that ends a
process by default and comes from outside it, `host.INTERRUPT_SIGNAL_NAMES`): how a run unwinds, how its teardown
survives more of them, and its exit code; and SIGCONT, which says the process was stopped (Ctrl-Z, SIGSTOP) while its
clocks ran on.

- The first signal unwinds like Ctrl-C (:class:`Interrupted`, a KeyboardInterrupt), so `finally` blocks stop the
  servers this process started (they run in their own sessions and would outlive it).
- Later signals never raise: an exception raised halfway through a teardown (or on the way to it) is how an engine
  gets orphaned, its pid file gone and its process group alive. They make the teardown hurry instead
  (:func:`hurried`: no more SIGTERM grace, SIGKILL now). SIGKILL abandons a shutdown; `run --resume` then stops what
  the killed run left.
- Unless the first one's interrupt was lost: a handler's exception lands wherever the main thread is, and a library's
  bare `except:` there swallows it (Cython's module set-up has one). No shutdown is then under way, so the next
  signal raises again (the interrupt is followed by a weak reference: gone, it was swallowed); one a finalizer
  dropped is raised again at once (`_rearm_lost`); and a command that ends normally after a signal still exits with
  the signal's status (`cli.main`). Long loops poll a stop request instead (:func:`stop_then_raise`).
- A teardown, or a launch that must record what it started, runs :func:`shielded`: even a first signal arriving
  there is held and raised when the block ends, unless an interrupt is already unwinding through it.
- The process exits 128 + the number of the first signal it received: 130 for SIGINT, 143 for SIGTERM, 129 for
  SIGHUP, 131 for SIGQUIT, 138 for SIGUSR1 (:func:`exit_code`). SIGQUIT (Ctrl-\\) is one of them: its default action
  ended the process at once, with a core dump, and the servers it started (each in a session of its own, which a
  terminal's Ctrl-\\ does not reach) ran on, holding their GPUs, until a `--resume`; so did SIGUSR1 (Slurm's
  `sbatch --signal=B:USR1@120`, sent ahead of a time limit precisely for a graceful stop) and SIGALRM, silently
  (exit 138, 142).
- A signal besides SIGINT, SIGTERM, SIGHUP and SIGQUIT is taken over only while it is at its default action (or
  ours already): one ignored or handled by something else in the process (a profiler's SIGPROF, pytest-timeout's
  SIGALRM) stays theirs (:func:`taken_over`).
- A stop of the process (Ctrl-Z, `kill -STOP`) that a SIGCONT ended is found by :func:`watching_pauses`: the
  servers it measures ran on meanwhile, so a load that spans it timed the pause too (`readback.judge_paused` judges
  that measurement invalid: a job of `run` or of a discovery's stage, a `bench`, a cell of `al collect`, a run of
  `peer crosscheck`).

Handlers are installed only from the main thread (Python delivers signals there); elsewhere every helper is a no-op.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from llmsweep.host import interrupt_signals

INTERRUPT_SIGNALS: tuple[signal.Signals, ...] = interrupt_signals()
"""Every signal a run unwinds on, as the list in `host` names them (those this platform has)."""
_ALWAYS = (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT)
"""Taken over whatever their disposition (see :func:`taken_over`)."""

_received: list[int] = []
"""Signals this process received through the handlers below, in order."""
_shield_depth = 0
_raised = False
"""An Interrupted was raised already: the shutdown it started is under way."""
_deferred: list[int] = []
"""Signals received inside the outermost shield now open (raised when it closes)."""
_continued: list[float] = []
"""When (`time.monotonic()`) each SIGCONT came."""
PAUSE_TICK_S = 0.1
"""How often :func:`watching_pauses`'s thread looks at the clock."""
PAUSE_MIN_S = 0.5
"""A tick this late, that a SIGCONT ended, is a stop of the process (shorter ones are not told from a busy machine)."""


class Interrupted(KeyboardInterrupt):
    """The process got an interrupt signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, ...); unwinds like Ctrl-C and
    carries the signal for the exit code."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"received {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def received() -> list[int]:
    """The signals received so far, oldest first."""
    return list(_received)


def record(signum: int) -> None:
    """Note a signal received without raising (what a handler that only hurries a shutdown does)."""
    _received.append(signum)


def interrupt(signum: int, kind: type[Interrupted] = Interrupted) -> Interrupted:
    """For a handler elsewhere (the Slurm submitter's): note the signal and return the interrupt to raise. The
    shutdown it starts counts as under way, so later signals hurry it rather than raise again."""
    _forget_lost()
    _received.append(signum)
    _under_way()
    return kind(signum)


def hold_while_exiting() -> None:
    """A process that stops for a signal has decided its exit status (128 + the first one): from here, ignore further
    interrupt signals while it exits. The interpreter's finalisation puts every Python handler back to the default
    action and then tears its modules down, and the C library's exit runs its libraries' destructors (OpenBLAS joins
    its thread pool, which can take most of a second), and a second Ctrl-C or SIGTERM in that time killed the process
    by that signal (status -2, -15; SIGQUIT a core file) instead of the status it had decided.

    Ignored, process-wide: blocking them in this thread was not enough, since a signal sent to the process goes to
    any thread that does not block it, and a library's native threads (OpenBLAS's, started by numpy's import) never
    did; the default action that thread met ended the whole process. The finalisation keeps an ignored signal
    ignored. A child started from here would inherit the ignoring, but none is: the command has ended, and its
    teardown stopped the servers and workers it started. Only after a signal: a command that ends normally stays
    interruptible to its last instruction. Called by the console entry point alone (never inside a test runner,
    whose own Ctrl-C it would take)."""
    if not _received or not _in_main_thread():
        return
    for sig in INTERRUPT_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


@contextmanager
def watching_pauses() -> Iterator[list[float]]:
    """The stops of this process inside the block (Ctrl-Z's SIGTSTP, `kill -STOP`, each ended by a SIGCONT), as their
    lengths in seconds, in the returned list once the block ends. The clocks ran on through them, and so did the
    servers this process measures.

    A thread of its own ticks every `PAUSE_TICK_S`: a stop is a tick late by `PAUSE_MIN_S` or more with a SIGCONT
    at its end. Neither alone is one: bash's `fg` sends SIGCONT to a job that was running all along, and a busy
    machine can make a tick late. Where no handler notes SIGCONT (:func:`install` was not called, not the main
    thread), none is found."""
    found: list[float] = []
    late: list[tuple[float, float]] = []
    done = threading.Event()

    def tick() -> None:
        last = time.monotonic()
        while not done.wait(PAUSE_TICK_S):
            now = time.monotonic()
            if now - last >= PAUSE_MIN_S:
                late.append((last, now))
            last = now

    before = len(_continued)
    ticker = threading.Thread(target=tick, name="llmsweep-pauses", daemon=True)
    ticker.start()
    try:
        yield found
    finally:
        done.set()
        ticker.join()
        continues = _continued[before:]
        # the handler runs once the main thread runs again: a moment after the ticker may have seen the stop's end
        found.extend(round(end - start, 1) for start, end in late
                     if any(start <= at <= end + 1.0 for at in continues))


def _note_continued(signum: int, frame: FrameType | None) -> None:
    _continued.append(time.monotonic())


def hurried() -> bool:
    """True once a second interrupt arrived: a teardown stops waiting out its grace and kills what is left."""
    return len(_received) >= 2


def first_signal(exc: BaseException | None = None) -> int:
    """The signal the run stops for: the first received (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, ...), else
    `exc`'s, else SIGINT (an interrupt no handler of ours saw: plain Ctrl-C)."""
    if _received:
        return _received[0]
    if isinstance(exc, Interrupted):
        return exc.signum
    return signal.SIGINT


def exit_code(exc: BaseException | None = None) -> int:
    """128 + the first signal received (130, 143, 129, 131, 138, ...); 130 for an interrupt no handler of ours saw
    (plain Ctrl-C)."""
    return 128 + first_signal(exc)


def signal_of_exit(status: int | None) -> signal.Signals | None:
    """The signal an exit status of 128 + N says ended a process (a shell's, docker's, a batch script's spelling of
    a child killed by signal N), or None for any other status."""
    if status is None or not 128 < status <= 128 + 64:
        return None
    try:
        return signal.Signals(status - 128)
    except ValueError:
        return None


def exit_said(status: int | None) -> str:
    """How a process ended, as a reason says it: `exited with status N`, or `was killed by SIGSEGV (signal 11)` for
    one a signal ended — Python's status −N for its own child, or `(exit 139)` for a shell's, a batch script's or
    docker's 128 + N — the SIGKILL of an out-of-memory kill naming its usual causes."""
    if status is None:
        return "exited (its status unknown)"
    if status < 0:
        try:
            sig: signal.Signals | None = signal.Signals(-status)
        except ValueError:
            sig = None
        code = f"signal {-status}"
    else:
        sig, code = signal_of_exit(status), f"exit {status}"
    if sig is None:
        return f"exited with status {status}"
    if sig == signal.SIGKILL:
        return (f"was killed by SIGKILL ({code}: the kernel's out-of-memory killer, or a `kill -9` from outside this "
                "run)")
    return f"was killed by {sig.name} ({code})"


def interrupted_by(signum: int) -> str:
    """`interrupted by SIGTERM`: what a signal stopped, as everything stopped by one says it (a benchmark's stop
    reason, its in-flight records, the outcome of the job it stopped in a sweep). Inside :func:`named_for`, the signal
    the received one stands for."""
    for stands_for in reversed(_standing):
        if (other := stands_for(signum)) is not None:
            signum = other
            break
    return f"interrupted by {signal.Signals(signum).name}"


_standing: list[Callable[[int], int | None]] = []
"""The innermost :func:`named_for`'s last: what a signal this process received stands for."""


@contextmanager
def named_for(stands_for: Callable[[int], int | None]) -> Iterator[None]:
    """Inside the block a reason names a received signal as the one `stands_for` says it stands for (None: itself).
    A Slurm worker is stopped by its driver's `scancel`, SIGTERM whatever stopped the driver: its records name the
    driver's signal, the one the run exits for (`execute.slurm.driver_signal`). Only the words change: the exit
    status and the teardown follow the signal received."""
    _standing.append(stands_for)
    try:
        yield
    finally:
        _standing.remove(stands_for)


INTERRUPTED_REASONS = frozenset(interrupted_by(sig) for sig in INTERRUPT_SIGNALS)
"""Every `interrupted_by` reason: a job's outcome that one heads was stopped by a signal (on a Slurm node: its batch
job's cancellation, or its time limit)."""


def reset() -> None:
    """Forget received signals (tests that interrupt an in-process run more than once)."""
    global _raised, _unwinding
    _received.clear()
    _deferred.clear()
    _consumed.clear()
    _continued.clear()
    _raised = False
    _unwinding = None


def _under_way() -> None:
    """A shutdown is under way (later signals hurry it), not by an interrupt the handler raised and follows."""
    global _raised, _unwinding
    _raised, _unwinding = True, None


def _interrupt(signum: int) -> Interrupted:
    _under_way()
    return Interrupted(signum)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


_unwinding: weakref.ref[Interrupted] | None = None
"""The Interrupted the handler raised last, while it lives: the unwinding it started is under way."""
_consumed: list[BaseException] = []
"""Interrupts code caught to write up what it measured (:func:`consumed`), kept alive: their shutdown is under way."""


def _lost() -> bool:
    """The handler's Interrupted is gone while the run goes on: code that swallowed it (a library's bare `except:`)
    dropped it, and no shutdown is under way for a later signal to hurry."""
    return _unwinding is not None and _unwinding() is None


def consumed(exc: BaseException) -> None:
    """Say that `exc`, an interrupt, was caught on purpose, to write up what was measured before the command ends
    (`al collect`, `discover`): its shutdown is under way, so later signals hurry it rather than raise again, as they
    would after an interrupt a library swallowed (:func:`_lost`)."""
    _consumed.append(exc)


def interrupt_in(exc: BaseException) -> Interrupted | None:
    """The interrupt behind `exc`, when a library turned one into an error of its own (an extension module's
    initialisation wraps an Interrupted that landed in it in `ImportError: initialization failed`): the run stops for
    the signal, not for an error in its code."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, Interrupted):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def checkpoint() -> None:
    """Raise the interrupt a library swallowed, if one did: a loop's boundary between units of work (`predict`'s
    points; a stop request starts set by one, :func:`stop_on_signal`), so the stop the user asked for is not lost
    for the rest of the command."""
    if _lost():
        raise _followed(_interrupt(first_signal()))


def _followed(exc: Interrupted) -> Interrupted:
    global _unwinding
    _unwinding = weakref.ref(exc)
    return exc


def _forget_lost() -> None:
    """A signal arrives after an interrupt a library swallowed: that one started nothing, so this one is the first
    the shutdown hears — it raises (or, in a shield, is raised when the shield closes), and the teardown it starts
    keeps its grace (a swallowed signal counted as a first would make it hurried)."""
    global _raised, _unwinding
    if _lost():
        _received.clear()
        _raised, _unwinding = False, None


def _raise(signum: int, frame: FrameType | None) -> None:
    _forget_lost()
    _received.append(signum)
    if not _raised:
        raise _followed(_interrupt(signum))  # no local: a cycle (its traceback holds this frame) outlives a swallowing


def _defer(signum: int, frame: FrameType | None) -> None:
    _forget_lost()
    _received.append(signum)
    _deferred.append(signum)


def taken_over(sig: signal.Signals) -> bool:
    """Whether llmsweep handles `sig` in this process. `nohup` ignores SIGHUP on purpose, so that setting is kept: a
    run under `nohup` outlives the terminal that started it, with its Slurm jobs. A script's `llmsweep run &` starts
    with SIGINT ignored too, but an explicit `kill -INT` must still stop the run (and its servers) the way Ctrl-C
    does. The other interrupt signals (SIGUSR1, SIGALRM, ...) are taken while at their default action, which would
    end the process with nothing torn down, or while a handler of ours has them; one ignored, or handled by
    something else in the process (a profiler's SIGPROF, pytest-timeout's SIGALRM), is left as it is."""
    if sig in _ALWAYS:
        return True
    current = signal.getsignal(sig)
    if sig == signal.SIGHUP:
        return current is not signal.SIG_IGN
    return current is signal.SIG_DFL or current in _ours


_ours: weakref.WeakSet[Any] = weakref.WeakSet()
"""The handlers llmsweep installed (:func:`_take_over`): a signal one of them has is ours to swap."""


def _take_over(sig: signal.Signals, handler: Any) -> Any:
    """Install `handler` for `sig` as llmsweep's own (a nested :func:`shielded` then swaps it in turn); returns the
    previous handler, for the caller to put back."""
    _ours.add(handler)
    return signal.signal(sig, handler)


def _rearm_lost(unraisable: Any) -> None:
    """`sys.unraisablehook`: an Interrupted raised while the interpreter ran a finalizer (a weakref callback, a
    `__del__`) is printed and dropped there, and the run went on with the signal spent (`_raised` set: later ones only
    hurried a shutdown that never began) — a Ctrl-C ignored, the sweep finishing with exit 0. The signal is raised
    again, from another thread (raised here, it would land in this hook and be dropped the same way), to land in the
    run's own code once the finalizer is done."""
    exc = getattr(unraisable, "exc_value", None)
    if not isinstance(exc, Interrupted) or not _in_main_thread():
        _previous_hook(unraisable)
        return
    global _raised, _unwinding
    _raised, _unwinding = False, None  # not lost: raised again below (a check meanwhile would take it for lost)
    if _received and _received[-1] == exc.signum:
        _received.pop()  # the handler records it again: one signal, not a second that would hurry the teardown
    def again(signum: int = exc.signum) -> None:
        time.sleep(0.01)  # past this hook: a signal landing in it would be dropped as well (a finalizer: again)
        os.kill(os.getpid(), signum)

    threading.Thread(target=again, name="llmsweep-rearm", daemon=True).start()


_previous_hook = sys.unraisablehook


def install() -> None:
    """Make the first interrupt signal raise :class:`Interrupted` (and later ones hurry the shutdown) for the rest of
    the process: the CLI's entry point. An interrupt a finalizer swallowed is raised again (`_rearm_lost`); a SIGCONT
    is noted (:func:`watching_pauses`)."""
    if not _in_main_thread():
        return
    for sig in INTERRUPT_SIGNALS:
        if taken_over(sig):
            _take_over(sig, _raise)
    signal.signal(signal.SIGCONT, _note_continued)
    sys.unraisablehook = _rearm_lost


@contextmanager
def interrupting() -> Iterator[None]:
    """Inside the block the first interrupt signal raises :class:`Interrupted` (SIGTERM's default would end the
    process at once, leaving the servers it started running); the previous handlers come back afterwards."""
    with handling(_raise):
        yield


@contextmanager
def handling(handler: Any) -> Iterator[None]:
    """Inside the block `handler` has every interrupt signal (`INTERRUPT_SIGNALS`) that llmsweep takes in this
    process (:func:`taken_over`: one at its default action or a handler of ours; one ignored, or another's, is left
    as it is), as llmsweep's own, so that a :func:`shielded` step inside holds them; the previous handlers come back
    afterwards. For a guard with a handler of its own (the Slurm submitter's `cancel_on_interrupt`), used from Python
    with or without :func:`install`. A no-op outside the main thread."""
    if not _in_main_thread():
        yield
        return
    previous = _swap(handler)
    try:
        yield
    finally:
        _restore(previous)


@contextmanager
def shielded() -> Iterator[None]:
    """Run a teardown (or a launch that must record what it started) to its end whatever signals arrive.

    A signal received inside is recorded (a second one overall makes :func:`hurried` true) and raised as
    :class:`Interrupted` when the outermost shield closes, unless an interrupt is already unwinding through it.
    """
    global _shield_depth
    if not _in_main_thread():
        yield
        return
    outer = _shield_depth == 0
    previous = _swap(_defer) if outer else {}
    if outer:
        _deferred.clear()
    _shield_depth += 1
    unwinding: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        unwinding = exc
        raise
    finally:
        _shield_depth -= 1
        if outer:
            _restore(previous)
            pending = list(_deferred)
            _deferred.clear()
            # The held signal wins over an error (the user asked to stop), never over an interrupt already unwinding.
            if pending and not _raised and not isinstance(unwinding, KeyboardInterrupt):
                raise _interrupt(pending[0])


class StopRequest:
    """The first interrupt signal received inside :func:`stop_on_signal`, for a long-running loop to poll."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def reason(self) -> str | None:
        """`interrupted by SIGTERM` once a signal came, else None (the form `RunOptions` stop reasons take)."""
        return None if self.signum is None else interrupted_by(self.signum)

    @property
    def exit_code(self) -> int | None:
        return None if self.signum is None else exit_code()

    def check(self) -> None:
        """Raise :class:`Interrupted` if a signal came: a loop's poll point (a virtual-time simulation's every virtual
        second), where the interrupt starts from the loop's own code."""
        if self.signum is not None:
            raise Interrupted(self.signum)


@contextmanager
def stop_on_signal() -> Iterator[StopRequest]:
    """Inside the block interrupt signals raise nothing: the first is noted in the returned request, which the work
    polls to stop itself and still write what it has (a benchmark's in-flight records and summary); later ones are
    recorded only. The shutdown the first one starts counts as under way: after the block, signals no longer raise.
    """
    request = StopRequest()
    if not _in_main_thread():
        yield request
        return
    if _lost():  # a signal a library swallowed before this block: the stop it asked for starts here
        request.signum = first_signal()
        _under_way()

    def note(signum: int, frame: FrameType | None) -> None:
        _forget_lost()
        _received.append(signum)
        if request.signum is None:
            request.signum = signum
            _under_way()

    previous = _swap(note)
    try:
        yield request
    finally:
        _restore(previous)


@contextmanager
def stop_then_raise() -> Iterator[StopRequest]:
    """:func:`stop_on_signal` around a benchmark's event loop, then the first signal raised as :class:`Interrupted`
    once the block is done, so the run unwinds from there as from any other interrupt.

    A signal handler that raises runs wherever the main thread happens to be: inside the event loop that is in a
    coroutine's frame, whose `finally` blocks then await with the loop still running (the lanes still sending, the
    interrupt held in that frame) for as long as the server takes to answer, which for a frozen server is forever.
    A stop request is polled at the loop's own pace instead: in-flight requests are cancelled and recorded, and the
    loop ends before anything is raised (or it raises from its poll point, :meth:`StopRequest.check`).

    It is also the way to make sure a signal is not lost: a handler's exception lands wherever the main thread is,
    and a library's bare `except:` there swallows it (Cython's module set-up registers its memoryview types under
    one: a signal landing while `numpy.random` is first imported was dropped, and the run went on to exit 0).

    An error the block raises after a signal came is raised as the signal's interrupt (from that error): the user
    asked to stop, and the stop may be what made the error (a `timeout -s INT` reached the client's record helper
    too, which died, and the job failed with "the record helper process ended before it was ready"). As a plain
    error, the job failed and the sweep ran on, the signal spent, until `timeout -k` killed it with its server.
    """
    with stop_on_signal() as request:
        try:
            yield request
        except Exception as exc:
            if request.signum is None:
                raise
            raise Interrupted(request.signum) from exc
    if request.signum is not None:
        raise Interrupted(request.signum)


def _swap(handler: Any) -> dict[signal.Signals, Any]:
    previous: dict[signal.Signals, Any] = {}
    for sig in INTERRUPT_SIGNALS:
        current = signal.getsignal(sig)
        if current is signal.SIG_IGN or not taken_over(sig):
            continue
        previous[sig] = current
        _take_over(sig, handler)
    return previous


def _restore(previous: dict[signal.Signals, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
