from __future__ import annotations

import subprocess
import sys

import click


def test_help_lists_commands_and_exits_zero() -> None:
    out = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "llmsweep" in out.stdout


def test_every_command_has_help_and_shows_one_spelling_per_option() -> None:
    """`llmsweep X --help` works for every command and subcommand and never shows an old spelling."""
    from click.testing import CliRunner

    from llmsweep.cli.main import cli

    def paths(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        found = [path]
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                found += paths(command.get_command(ctx, name), (*path, name))  # type: ignore[arg-type]
        return found

    every = paths(cli)
    assert len(every) > 30
    for path in every:
        res = CliRunner().invoke(cli, [*path, "--help"])
        assert res.exit_code == 0, (path, res.output)
        for old in ("--config-key ", "--timeout ", "--workers ", "--warmup ", "--resummarise", "--method "):
            assert old not in res.output, (path, old)
