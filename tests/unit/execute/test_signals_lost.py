"""A first signal whose Interrupted is swallowed (raised while the interpreter runs a finalizer, or into a library's
bare `except:`) is not lost: it is raised again, the next signal raises, a virtual-time job polls for it, and a
command that ends normally after one still exits with its status."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from llmsweep.execute import signals
from llmsweep.execute.progress import SweepProgress

RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "slow-fixed-sim.yaml"


def test_an_interrupt_a_finalizer_swallowed_is_raised_again_in_the_runs_own_code() -> None:
    """Seen in a full test run: SIGINT landed while a WeakValueDictionary callback ran, Python printed 'Exception
    ignored in …' and dropped the Interrupted, and the first signal being spent, the sweep ran on to exit 0."""

    class Finalised:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGINT)  # delivered while this finalizer runs
            sum(range(1000))  # bytecode for the handler to run in

    saved = {sig: signal.getsignal(sig) for sig in signals.INTERRUPT_SIGNALS}
    hook = sys.unraisablehook
    signals.reset()
    signals.install()
    try:
        with pytest.raises(signals.Interrupted) as caught:
            Finalised()  # dropped at once: its __del__ runs here
            time.sleep(5)  # the run's own code, where the interrupt lands now (at once: the sleep is cut short)
        assert caught.value.signum == signal.SIGINT
        assert signals.received() == [signal.SIGINT] and not signals.hurried()  # one signal, not two
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        sys.unraisablehook = hook
        signals.reset()


def _in_a_library_that_swallows(sig: signal.Signals) -> None:
    """The signal lands in a library's bare `except:` (Cython's module set-up registers its memoryview types under
    one: seen as a SIGTERM dropped while `numpy.random` was first imported, the run going on to exit 0)."""
    try:
        signal.raise_signal(sig)
        time.sleep(0.2)
    except:  # noqa: E722 - the library's code, as it is
        pass


@pytest.mark.usefixtures("installed")
def test_after_a_swallowed_interrupt_the_next_signal_raises_again() -> None:
    _in_a_library_that_swallows(signal.SIGINT)
    assert signals.received() == [signal.SIGINT]
    with pytest.raises(signals.Interrupted):  # the first one's shutdown never began: nothing to hurry
        signal.raise_signal(signal.SIGINT)
        time.sleep(5)


@pytest.mark.usefixtures("installed")
def test_a_signal_during_an_unwinding_only_hurries_it() -> None:
    with pytest.raises(signals.Interrupted) as caught:
        signal.raise_signal(signal.SIGTERM)
        time.sleep(5)
    try:
        raise caught.value  # still unwinding (a teardown in a `finally` on its way)
    except signals.Interrupted:
        signal.raise_signal(signal.SIGTERM)  # recorded, not raised: the teardown goes on, hurried
        sum(range(1000))
        assert signals.hurried()


@pytest.mark.usefixtures("installed")
def test_a_virtual_time_job_stops_for_a_signal_a_library_would_have_swallowed(tmp_path: Path) -> None:
    """The simulation polls a stop request at each virtual second; the handler raised wherever the main thread was,
    and a SIGTERM swallowed there left the job to finish valid and the run to exit 0 (a CI failure)."""
    from llmsweep.sim.predict import WindowProgress

    class Progress(SweepProgress):
        sent = 0

        def line(self, message: str) -> None:
            pass

        def simulated(self, window: WindowProgress) -> None:
            super().simulated(window)
            if not self.sent:  # at the first virtual second, with the job well under way
                self.sent += 1
                _in_a_library_that_swallows(signal.SIGTERM)

    _stopped_without_summary(tmp_path, Progress(), signal.SIGTERM, (("conc-list: [1, 2, 3]", "conc-list: [64]"),
                                                                   ("num-prompts: 3\n", "num-prompts: 2000\n")))


@pytest.mark.usefixtures("installed")
def test_a_virtual_job_interrupted_while_summarising_leaves_no_summary(tmp_path: Path) -> None:
    """A virtual-time job a signal stops leaves no summary beside its failed outcome (README: "in virtual time it
    has no summary"), even when the signal lands while the finished simulation is being summarised: a `summary.json`
    saying `valid` beside an `outcome.json` saying `interrupted by SIGINT` told a reader of the job folder it was
    good."""
    from llmsweep.execute.progress import JobState

    class Progress(SweepProgress):
        sent = False

        def line(self, message: str) -> None:
            pass

        def phase_changed(self, job: JobState) -> None:
            super().phase_changed(job)
            if job.phase == "summarising" and not self.sent:  # the simulation is done; its summary not yet made
                self.sent = True
                signal.raise_signal(signal.SIGINT)

    _stopped_without_summary(tmp_path, Progress(), signal.SIGINT, (("conc-list: [1, 2, 3]", "conc-list: [1]"),))


def _stopped_without_summary(tmp_path: Path, progress: SweepProgress, sig: signal.Signals,
                             edits: tuple[tuple[str, str], ...]) -> None:
    """Run RECIPE, edited, in virtual time under `progress` (which sends `sig` at its moment): the run stops with
    that signal, and its one job is failed as interrupted by it, with no summary."""
    from llmsweep.execute.pipeline import RunRequest, run_sweep
    from llmsweep.execute.progress import use_progress

    text = RECIPE.read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(text)
    out = tmp_path / "out"
    with use_progress(progress), pytest.raises(signals.Interrupted) as caught:
        run_sweep(RunRequest(files=[recipe], out=out, store=tmp_path / "store.sqlite", report=False),
                  event=lambda _: None)
    assert caught.value.signum == sig
    (job,) = (out / "jobs").iterdir()
    outcome = json.loads((job / "outcome.json").read_text())
    assert outcome["status"] == "failed" and outcome["reasons"] == [signals.interrupted_by(sig)]
    assert not (job / "summary.json").exists()


def _command(body: str) -> subprocess.CompletedProcess[str]:
    """`llmsweep swallow`, a command whose body is `body` (a library's code as the signal lands), run as `main`
    runs every command."""
    script = textwrap.dedent("""
        import signal, sys, time
        import click
        from llmsweep.cli.main import COMMANDS, main

        @click.command()
        def swallow() -> int:
        {body}

        COMMANDS["swallow"] = ("__main__", "swallow", "a command in which a library swallows a SIGTERM")
        main(["swallow"])
    """).format(body=textwrap.indent(textwrap.dedent(body), "    "))
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("ends", ["return 0", "return 1", "sys.exit(0)",
                                  "from llmsweep.errors import LaunchError; raise LaunchError('could not stop it')"])
def test_a_command_that_ends_normally_after_a_swallowed_signal_exits_with_the_signals_status(ends: str) -> None:
    """Exit 0 after a SIGTERM; and with 1 (a job failed besides), an error of its own or its own sys.exit (`run
    --_worker` on a Slurm node), nothing said of the signal at all."""
    proc = _command(f"""
        try:  # a library's bare except, as the signal lands
            signal.raise_signal(signal.SIGTERM)
            time.sleep(0.2)
        except:
            pass
        print("ran to its end")
        {ends}
    """)
    assert proc.returncode == 143, proc.stderr
    assert "ran to its end" in proc.stdout
    assert "interrupted by SIGTERM: the command ended as if the signal had not come" in proc.stderr


def test_a_command_that_exits_with_a_message_says_it() -> None:
    proc = _command("""
        sys.exit("fatal: something went wrong")
    """)
    assert proc.returncode == 1 and "fatal: something went wrong" in proc.stderr, proc.stderr


def test_an_interrupt_a_library_made_an_error_of_its_own_exits_as_the_signal() -> None:
    """Seen under stress in `report`: SIGINT landed while matplotlib's extension initialised, which raised
    `ImportError: initialization failed` from it: a traceback and exit 1."""
    proc = _command("""
        try:
            signal.raise_signal(signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt as exc:
            raise ImportError("initialization failed") from exc
    """)
    assert proc.returncode == 130, proc.stderr
    assert "interrupted by SIGINT (while ImportError: initialization failed)" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.usefixtures("installed")
def test_a_stop_request_begun_after_a_swallowed_interrupt_starts_stopped() -> None:
    """A signal swallowed just before a job's poll block (numpy.random first imported while the simulator's engine
    was built, before the job's stop request began) was seen by no poll: the whole virtual-time sweep ran on."""
    _in_a_library_that_swallows(signal.SIGTERM)
    with pytest.raises(signals.Interrupted) as caught, signals.stop_then_raise() as stop:
        assert stop.signum == signal.SIGTERM
        with pytest.raises(signals.Interrupted):
            stop.check()  # the loop's first poll
    assert caught.value.signum == signal.SIGTERM  # and the block's end, had the loop not polled
    signal.raise_signal(signal.SIGINT)  # the stop is under way: a second signal hurries it
    sum(range(1000))
    assert signals.hurried()


@pytest.mark.usefixtures("installed")
def test_a_checkpoint_raises_the_interrupt_a_library_swallowed() -> None:
    signals.checkpoint()  # nothing swallowed: nothing raised
    _in_a_library_that_swallows(signal.SIGTERM)
    with pytest.raises(signals.Interrupted) as caught:
        signals.checkpoint()  # `predict`'s next point
    assert caught.value.signum == signal.SIGTERM


@pytest.mark.usefixtures("installed")
def test_an_interrupt_caught_to_write_up_what_was_measured_is_not_taken_for_a_swallowed_one() -> None:
    """`al collect` catches the interrupt to write the curve of the cells measured; once the caught interrupt was
    freed, a second signal (SIGINT 0.13 s after SIGTERM) raised again and cut the write-up short."""
    try:
        signal.raise_signal(signal.SIGTERM)
        time.sleep(5)
    except KeyboardInterrupt as exc:
        signals.consumed(exc)
    signal.raise_signal(signal.SIGINT)  # during the write-up: recorded, not raised
    sum(range(1000))
    assert signals.received() == [signal.SIGTERM, signal.SIGINT] and signals.hurried()


@pytest.mark.usefixtures("installed")
def test_the_signal_after_a_swallowed_one_starts_an_unhurried_teardown_also_in_a_shield() -> None:
    """The swallowed signal counted as a first: the next one's teardown was hurried (no SIGTERM grace for the
    engines), and one landing in a shield (a launch or teardown) was never raised."""
    _in_a_library_that_swallows(signal.SIGTERM)
    with pytest.raises(signals.Interrupted):
        signal.raise_signal(signal.SIGTERM)
        time.sleep(5)
    assert signals.received() == [signal.SIGTERM] and not signals.hurried()

    signals.reset()
    _in_a_library_that_swallows(signal.SIGTERM)
    with pytest.raises(signals.Interrupted) as caught, signals.shielded():
        signal.raise_signal(signal.SIGINT)  # held until the shield closes, then raised
        sum(range(1000))
    assert caught.value.signum == signal.SIGINT and not signals.hurried()


@pytest.mark.usefixtures("installed")
def test_the_slurm_handlers_interrupt_after_a_swallowed_signal_is_a_first_one() -> None:
    _in_a_library_that_swallows(signal.SIGINT)
    exc = signals.interrupt(signal.SIGTERM)  # what the Slurm submitter's handler raises
    assert exc.signum == signal.SIGTERM and signals.received() == [signal.SIGTERM] and not signals.hurried()
    assert signals.exit_code() == 143


@pytest.mark.usefixtures("installed")
def test_an_interrupt_a_finalizer_dropped_is_not_taken_for_a_swallowed_one_before_it_is_raised_again() -> None:
    """Within the 10 ms before `_rearm_lost` raised it again, a checkpoint took it for swallowed and raised SIGINT
    (the fallback of an empty record): the outcome said SIGINT, the process exited 143."""

    class Finalised:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGTERM)
            sum(range(1000))

    with pytest.raises(signals.Interrupted) as caught:
        Finalised()
        signals.checkpoint()  # not lost: on its way back
        time.sleep(5)
    assert caught.value.signum == signal.SIGTERM and signals.received() == [signal.SIGTERM]


def test_a_teardown_error_that_replaced_the_interrupt_unwinds_the_sweep_as_the_signal(tmp_path: Path) -> None:
    """`docker rm` timed out while a Ctrl-C unwound a launch: the LaunchError replaced the Interrupted, `settle`
    failed the job with it like any error, and the sweep launched the next server."""
    from llmsweep.errors import LaunchError
    from llmsweep.execute.lifecycle import settle
    from llmsweep.plan import jobs_from_files

    (job, *_) = jobs_from_files([RECIPE])

    def measure() -> object:
        try:
            raise signals.Interrupted(signal.SIGINT)
        except KeyboardInterrupt:
            raise LaunchError("`docker rm -f x` failed with exit status 1: timed out") from None

    signals.reset()
    with pytest.raises(signals.Interrupted) as caught:
        settle(job, tmp_path, time.monotonic(), measure)  # type: ignore[arg-type]
    assert caught.value.signum == signal.SIGINT
    assert json.loads((tmp_path / "outcome.json").read_text())["reasons"] == ["interrupted by SIGINT"]


@pytest.mark.usefixtures("installed")
def test_an_error_a_stopped_benchmark_raises_unwinds_as_the_signal() -> None:
    """The stop a signal asked for can make the load end in an error (the same signal, sent to the whole process
    group, killed the client's record helper as it booted): the error must not stand for the interrupt, or the job
    fails as any job fails and the sweep runs on with the signal spent."""
    with pytest.raises(signals.Interrupted) as caught, signals.stop_then_raise():
        signal.raise_signal(signal.SIGINT)  # noted, not raised: the load stops at its next poll
        sum(range(1000))
        raise RuntimeError("the record helper process ended before it was ready")
    assert caught.value.signum == signal.SIGINT and isinstance(caught.value.__cause__, RuntimeError)
    with pytest.raises(RuntimeError), signals.stop_then_raise():  # without a signal, an error is the error
        raise RuntimeError("the server closed the connection")
