"""Which signals a command unwinds on: every one whose default action ends a process and that comes from outside it
(SIGUSR1 and SIGALRM ended `llmsweep run` at once, silently, exit 138 and 142, its server left running until a later
`--resume` stopped it; Slurm users send SIGUSR1 ahead of a time limit precisely to get a graceful stop). The rest are
left as they were: job control keeps stopping the process, `nohup`'s ignored SIGHUP stays ignored, and a signal that
something else in the process handles or ignores stays theirs. Each check runs in a fresh interpreter: a signal the
handlers do not take would end the test process itself."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time

import pytest

EXEMPT = {
    signal.SIGKILL: "nothing can catch it",
    signal.SIGPIPE: "Python ignores it from its start (a write fails instead)",
    signal.SIGXFSZ: "Python ignores it from its start (a write fails instead)",
    signal.SIGSEGV: "a fault of the process's own instruction",
    signal.SIGBUS: "a fault of the process's own instruction",
    signal.SIGFPE: "a fault of the process's own instruction",
    signal.SIGILL: "a fault of the process's own instruction",
    signal.SIGTRAP: "a fault of the process's own instruction",
    signal.SIGSYS: "a fault of the process's own instruction",
    signal.SIGABRT: "abort(): the process's own",
}
"""Signals that end a process by default and that a command rightly leaves alone (`host.INTERRUPT_SIGNAL_NAMES`
says why); real-time signals, a program's own, are not probed."""


def _ends_a_process(sig: signal.Signals) -> bool:
    """Whether `sig` at its default action ends a process (probed on a `sleep`, no core file written)."""

    def defaults() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sig != signal.SIGSTOP:  # (nothing sets SIGSTOP's action)
            signal.signal(sig, signal.SIG_DFL)  # an inherited ignore (a background pytest's SIGINT) would hide it
        signal.pthread_sigmask(signal.SIG_SETMASK, set())

    proc = subprocess.Popen(["sleep", "30"], preexec_fn=defaults)
    try:
        os.kill(proc.pid, sig)
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            pid, status = os.waitpid(proc.pid, os.WNOHANG | os.WUNTRACED)
            if pid:
                if os.WIFSIGNALED(status):
                    proc.returncode = -os.WTERMSIG(status)
                    return True
                return False  # stopped (SIGTSTP, SIGTTIN, SIGTTOU): job control, not an end
            time.sleep(0.01)
        return False  # ignored by default (SIGCHLD, SIGWINCH, SIGURG, SIGCONT)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()


def _in_fresh_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


NAMED = sorted(s for s in signal.Signals if s not in (signal.SIGRTMIN, signal.SIGRTMAX))


def test_every_signal_that_ends_a_process_by_default_unwinds_a_command_with_its_status() -> None:
    ending = [s for s in NAMED if s not in EXEMPT and _ends_a_process(s)]
    assert {signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGALRM} <= set(ending)  # the probe works
    run = _in_fresh_python(f"""
        import json, os, signal, time
        from llmsweep.execute import signals

        signals.install()  # as the `llmsweep` entry point does
        said = {{}}
        for n in {[int(s) for s in ending]!r}:
            signals.reset()
            try:
                os.kill(os.getpid(), n)
                time.sleep(5)
                said[n] = "not raised"
            except signals.Interrupted as exc:
                said[n] = [exc.signum, signals.exit_code(exc), signals.interrupted_by(exc.signum)]
        print(json.dumps(said))
        """)
    assert run.returncode == 0, f"a signal ended the process: status {run.returncode}\n{run.stderr}"
    said = {int(k): v for k, v in json.loads(run.stdout).items()}
    assert said == {int(s): [int(s), 128 + s, f"interrupted by {s.name}"] for s in ending}


def test_a_signal_a_shield_holds_is_raised_when_it_closes_and_a_second_one_only_hurries() -> None:
    """SIGUSR1 as SIGTERM is: held through a teardown (:func:`signals.shielded`), then raised; another one during the
    unwinding hurries it."""
    run = _in_fresh_python("""
        import json, os, signal, time
        from llmsweep.execute import signals

        steps = []
        try:
            with signals.interrupting(), signals.shielded():  # a library's run, no `install`
                os.kill(os.getpid(), signal.SIGUSR1)
                time.sleep(0.05)
                steps.append("teardown ran to its end")
        except signals.Interrupted as exc:
            steps.append(exc.signum)
        with signals.interrupting():
            os.kill(os.getpid(), signal.SIGALRM)
            time.sleep(0.05)
        print(json.dumps([steps, signals.received(), signals.hurried(), signals.exit_code()]))
        """)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [["teardown ran to its end", signal.SIGUSR1],
                                      [signal.SIGUSR1, signal.SIGALRM], True, 138]


def test_what_others_set_is_left_as_it_was() -> None:
    """Job control still stops the process (SIGTSTP, SIGTTIN, SIGTTOU at their defaults), what it ignores stays
    ignored (Python's SIGPIPE; SIGUSR2 started ignored, as `nohup` starts SIGHUP), and a handler of another (a
    profiler's SIGPROF, pytest-timeout's SIGALRM) stays theirs, inside a teardown's shield too."""
    run = _in_fresh_python("""
        import json, os, signal, time
        from llmsweep.execute import signals

        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        profiled = []
        signal.signal(signal.SIGPROF, lambda n, f: profiled.append(n))
        watched = [signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGCHLD, signal.SIGWINCH, signal.SIGPIPE,
                   signal.SIGUSR2, signal.SIGHUP, signal.SIGPROF]
        before = [str(signal.getsignal(s)) for s in watched]
        signals.install()
        installed = [str(signal.getsignal(s)) for s in watched]
        with signals.shielded():
            os.kill(os.getpid(), signal.SIGPROF)
            time.sleep(0.05)
        print(json.dumps([before == installed, profiled, signals.received(),
                          [signals.taken_over(s) for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGPROF)]]))
        """)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [True, [signal.SIGPROF], [], [True, False, False]]


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGALRM], ids=lambda s: s.name)
def test_a_servers_stop_signal_stops_it_cleanly(sig: signal.Signals) -> None:
    """Our servers (`sim serve`, `router`) stop on every interrupt signal and say which: a SIGUSR1 killed them."""
    run = _in_fresh_python(f"""
        import asyncio, os, signal, threading
        from llmsweep.cli.serving import wait_for_stop

        threading.Timer(0.5, os.kill, (os.getpid(), {int(sig)})).start()
        asyncio.run(wait_for_stop("sim serve"))
        """)
    assert (run.returncode, run.stderr) == (0, f"llmsweep sim serve: stopping on {sig.name}\n")


def _at_defaults() -> None:
    """A child's interrupt signals at their default action, whatever the test runner inherited (a `nohup`'s ignored
    SIGHUP, a background job's ignored SIGINT), as a Python program using the library starts."""
    from llmsweep.host import interrupt_signals

    for sig in interrupt_signals():
        signal.signal(sig, signal.SIG_DFL)


_SLURM_GUARD = """
    import json, os, signal, time
    from llmsweep.execute import signals, slurm

    cancelled = []
    def cancel_jobs(jobs, *, wait_s, announced=False):  # scancel, as the guard calls it: what it was asked to cancel
        cancelled.extend(job.job_id for job in jobs)
        return []
    slurm.cancel_jobs = cancel_jobs

    class Submitted:  # a batch job sbatch accepted, not yet ended
        job_id, result, options = "684", None, slurm.SlurmOptions()

    def guarded(n):
        signals.reset()
        cancelled.clear()
        try:
            with slurm.cancel_on_interrupt([Submitted()]):
                os.kill(os.getpid(), n)
                time.sleep(2)
                return ["not raised", list(cancelled)]
        except KeyboardInterrupt as exc:
            return [type(exc).__name__, signals.exit_code(exc), list(cancelled)]
"""


def test_the_slurm_guard_used_without_the_cli_cancels_its_jobs_on_every_interrupt_signal() -> None:
    """`cancel_on_interrupt` used from Python, without the CLI's `install()`: every interrupt signal
    (`host.INTERRUPT_SIGNAL_NAMES`) unwinds it and its submitted jobs are cancelled. It took SIGTERM and SIGHUP
    alone, and SIGUSR1 — what `sbatch --signal=B:USR1@120` sends ahead of the time limit — killed the submitter at
    once, its batch jobs left queued."""
    from llmsweep.host import interrupt_signals

    sigs = [int(s) for s in interrupt_signals()]
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(_SLURM_GUARD) + textwrap.dedent(f"""
        print(json.dumps({{n: guarded(n) for n in {sigs!r}}}))
        """)], capture_output=True, text=True, timeout=120, preexec_fn=_at_defaults)
    assert run.returncode == 0, f"a signal ended the process: status {run.returncode}\n{run.stderr}"
    said = {int(k): v for k, v in json.loads(run.stdout).items()}
    assert said == {n: ["SlurmInterrupted", 128 + n, ["684"]] for n in sigs}


def test_the_slurm_guard_leaves_a_signal_others_handle_or_ignore() -> None:
    """As the CLI's handlers do (`signals.taken_over`): a signal ignored (`nohup`'s SIGHUP, SIGUSR2) stays ignored
    inside the guard, and one another part of the process handles (pytest-timeout's SIGALRM) stays theirs; each
    has its handler back after the block."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(_SLURM_GUARD) + textwrap.dedent("""
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        alarms = []
        signal.signal(signal.SIGALRM, lambda n, f: alarms.append(n))
        watched = [signal.SIGHUP, signal.SIGUSR2, signal.SIGALRM, signal.SIGUSR1, signal.SIGTERM]
        before = [str(signal.getsignal(s)) for s in watched]
        with slurm.cancel_on_interrupt([Submitted()]):
            for n in (signal.SIGHUP, signal.SIGUSR2, signal.SIGALRM):
                os.kill(os.getpid(), n)
            time.sleep(0.2)
        after = [str(signal.getsignal(s)) for s in watched]
        print(json.dumps([alarms, signals.received(), before == after]))
        """)], capture_output=True, text=True, timeout=120, preexec_fn=_at_defaults)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [[signal.SIGALRM], [], True]
