"""The `llmsweep` command group.

Subcommands live in their own modules under `llmsweep.cli` and are imported only when invoked, so `llmsweep --help`
stays fast on a 2-core machine and a heavy dependency of one command never slows another.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import click

from llmsweep import __version__
from llmsweep.errors import LlmsweepError

# name -> (module, attribute, one-line help). Order is the order `--help` lists them.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "validate": ("llmsweep.cli.validate", "validate", "Check recipes against the schema, policy and engine contracts."),
    "rules": ("llmsweep.cli.validate", "rules", "List every policy and contract rule with its id and severity."),
    "schema": ("llmsweep.cli.validate", "schema", "Print the recipe (or summary.json) JSON Schema for editors."),
    "matrix": ("llmsweep.cli.matrix", "matrix", "Expand recipes into jobs (InferenceX-compatible JSON)."),
    "render": ("llmsweep.cli.render", "render", "Print the exact server command and environment of a job."),
    "al": ("llmsweep.cli.catalog", "al", "Look up a golden acceptance length."),
    "catalog": ("llmsweep.cli.catalog", "catalog", "Show the hardware, fleet, model, engine and image catalogs."),
    "bench": ("llmsweep.cli.bench", "bench", "Drive load against an OpenAI-compatible endpoint."),
    "summarize": ("llmsweep.cli.bench", "summarize", "Recompute summary.json from raw records."),
    "traces": ("llmsweep.cli.traces", "traces", "Synthesise agentic traces and show corpus statistics."),
    "sim": ("llmsweep.cli.sim", "sim", "The simulated engine: serve it, or calibrate it."),
    "predict": ("llmsweep.cli.sim", "predict", "Predict every job of a recipe in virtual time."),
    "router": ("llmsweep.cli.router", "router", "Serve a prefill/decode router in front of disaggregated workers."),
    "run": ("llmsweep.cli.run", "run", "Run recipes end to end: launch, load, gate, store, report."),
    "discover": ("llmsweep.cli.discover", "discover", "Measure noise and knee per arm; propose the official grid."),
    "changes": ("llmsweep.cli.changes", "changes", "Jobs added, removed and changed between two recipe revisions."),
    "changelog": ("llmsweep.cli.changes", "changelog", "Validate a perf-changelog.yaml, list the jobs it selects, "
                  "prepare a pull request's entries to merge."),
    "ci": ("llmsweep.cli.ci", "ci", "Write the GitHub Actions workflow that sweeps a labelled pull request."),
    "results": ("llmsweep.cli.results", "results", "List, show, export and import stored results."),
    "compare": ("llmsweep.cli.results", "compare", "Compare two runs point by point with noise bands."),
    "report": ("llmsweep.cli.report", "report", "Write the HTML dashboard, plots and Markdown summary of a run."),
    "model": ("llmsweep.cli.model", "model", "Write model directories engines serve offline: dummy or real weights."),
    "peer": ("llmsweep.cli.peer", "peer", "Cross-check llmsweep's client against aiperf on the same server."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if self._available(name)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module_name, attr, _ = COMMANDS[cmd_name]
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                return None
            raise
        command = getattr(module, attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module_name}.{attr} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    @staticmethod
    def _available(name: str) -> bool:
        return importlib.util.find_spec(COMMANDS[name][0]) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="llmsweep")
@click.option("-v", "--verbose", count=True, help="More diagnostics on stderr (-vv for debug).")
def cli(verbose: int) -> None:
    """llmsweep: trustworthy, comparable LLM-inference benchmarks, recipe to dashboard."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


class _Output:
    """stdout or stderr, whose reader may go away while a command runs: a pipe's (`| head -1`: EPIPE) or a terminal's
    (closed, or its SSH session dropped: EIO, after the SIGHUP that stops the run). The first write that finds it gone
    points its file descriptor at /dev/null, and the command goes on as if it had been written: a run's progress line
    raised the error in whatever the run was doing (the job in flight failed with "internal error:
    BrokenPipeError", the sweep stopped with exit 1 and no word; after a SIGHUP the run exited 1 rather than 129), and
    a final table nobody reads turned a sweep of valid jobs into exit 1."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self.stream.write(text))
        except OSError as exc:
            self._gone(exc)
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as exc:
            self._gone(exc)

    def _gone(self, exc: OSError) -> None:
        if exc.errno not in (errno.EPIPE, errno.EIO):
            raise exc
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self.stream.fileno())
        finally:
            os.close(devnull)
        with contextlib.suppress(OSError):
            self.stream.flush()  # what it still held goes to /dev/null too, not to the interpreter's exit

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def _outputs_may_go() -> Iterator[None]:
    """stdout and stderr as :class:`_Output` for the block, flushed before they are given back (a pipe holds the last
    of a command's output until then)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (None if s is None else _Output(s) for s in saved)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        sys.stdout, sys.stderr = saved


def main(argv: list[str] | None = None) -> Any:
    """Console entry point: run the group, print llmsweep errors once without a traceback.

    SIGINT, SIGTERM, SIGHUP, SIGQUIT and the other interrupt signals (SIGUSR1, SIGALRM, ...:
    `execute.signals.INTERRUPT_SIGNALS`) unwind like Ctrl-C (servers a command started are stopped on the way out) and
    the exit status follows the shell's convention: 128 + the first signal received (130 SIGINT, 143 SIGTERM). An
    output whose reader went away (`| head`, a closed terminal) stops nothing: what is written to it is dropped.
    """
    with _outputs_may_go():
        return _main(argv)


def _main(argv: list[str] | None) -> Any:
    from llmsweep.execute import signals

    signals.install()
    try:
        rv = cli.main(args=argv, prog_name="llmsweep", standalone_mode=False)
    except LlmsweepError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(_after_signal(exc.exit_code))  # e.g. a teardown that failed while a signal unwound the run
    except SystemExit as exc:  # a command that ends itself (`run --_worker` on a Slurm node)
        if exc.code is not None and not isinstance(exc.code, int):
            click.echo(exc.code, err=True)  # `sys.exit("message")`: said, as Python says it
        sys.exit(_after_signal(exc.code if isinstance(exc.code, int) else 1 if exc.code else 0))
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(_after_signal(2))
    except click.exceptions.Abort as exc:
        # click turns KeyboardInterrupt (our signals' Interrupted among them) into Abort.
        interrupted = isinstance(exc.__cause__, KeyboardInterrupt) or bool(signals.received())
        click.echo(signals.interrupted_by(signals.first_signal(exc.__cause__)) if interrupted else "aborted",
                   err=True)
        sys.exit(signals.exit_code(exc.__cause__))
    except KeyboardInterrupt as exc:
        click.echo(signals.interrupted_by(signals.first_signal(exc)), err=True)
        sys.exit(signals.exit_code(exc))
    except Exception as exc:
        if (interrupt := signals.interrupt_in(exc)) is None:
            raise
        click.echo(f"{signals.interrupted_by(signals.first_signal(interrupt))} (while {type(exc).__name__}: {exc})",
                   err=True)
        sys.exit(signals.exit_code(interrupt))
    sys.exit(_after_signal(rv if isinstance(rv, int) else 0))


def _after_signal(code: int) -> int:
    """The exit status of a command that ended with `code` (normally, or by an error or exit of its own): after a
    signal, 128 + the first one whatever it ended with. Ending so means its interrupt was lost (a library's bare
    `except:` swallowed it, and the command ran to its end) or replaced (a teardown failed while it unwound the run);
    the user asked it to stop, and the status says so."""
    from llmsweep.execute import signals

    if not signals.received() or code >= 128:
        return code
    click.echo(f"{signals.interrupted_by(signals.first_signal())}: the command ended as if the signal had not come "
               "(a library swallowed it, or an error replaced it)", err=True)
    return signals.exit_code()


if __name__ == "__main__":
    from llmsweep.cli.entry import main as entry_main

    entry_main()
