"""`predict --max-requests 0` (or -1) predicted every point `invalid: no successful profiling request` and exited 0;
`--duration -5` spawned the worker processes and refused each point; `--duration nan`/`inf` were taken. Each is now
refused as the option is parsed (exit 2, the option named), before any point is planned, as `bench` refuses its own
out-of-range options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.cli.main import cli

FIXED = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"


@pytest.mark.parametrize(("option", "value"), [("--max-requests", "0"), ("--max-requests", "-1"),
                                               ("--duration", "-5"), ("--duration", "0"), ("--duration", "nan"),
                                               ("--duration", "inf")])
def test_an_out_of_range_option_is_refused_as_it_is_parsed(option: str, value: str) -> None:
    res = CliRunner().invoke(cli, ["predict", str(FIXED), option, value, "--processes", "1", "--json"])
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert f"Invalid value for '{option}'" in res.stderr and "predicting" not in res.stderr, res.stderr
    assert res.stdout == ""


def test_values_in_range_still_predict() -> None:
    res = CliRunner().invoke(cli, ["predict", str(FIXED), "--duration", "30", "--max-requests", "3", "--processes",
                                   "1", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [row["summary"]["requests"]["successful"] for row in rows] == [3, 3]
