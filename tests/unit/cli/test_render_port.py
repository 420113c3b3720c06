"""`render --port` takes only a port a server can bind: `--port 99999` and `--port -5` were rendered (`--port 99999`
in the script, `"port": -5` in the JSON) and exited 0, where a recipe's `serve.port` of either is a schema error."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from support.cli import run_main

from llmsweep.cli.main import cli

REPO = Path(__file__).resolve().parents[3]
SEED = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
JOB = "qwen3.5_tp8_conc8_kvnone_spec-mtp"


@pytest.mark.parametrize("port", ["0", "-5", "65536", "99999"])
def test_a_port_no_server_can_bind_is_refused_as_the_option_is_parsed(port: str) -> None:
    res = CliRunner().invoke(cli, ["render", str(SEED), "--job", JOB, "--format", "sh", "--port", port])
    assert res.exit_code == 2, res.output
    assert "Invalid value for '--port'" in res.output and "1<=x<=65535" in res.output
    assert "exec " not in res.output


@pytest.mark.parametrize("port", ["1", "65535"])
def test_a_port_in_range_is_rendered(port: str) -> None:
    res = CliRunner().invoke(cli, ["render", str(SEED), "--job", JOB, "--format", "sh", "--port", port])
    assert res.exception is None, res.output
    assert res.stdout.startswith("#!/usr/bin/env bash") and f"  --port {port} \\\n" in res.stdout


@pytest.mark.parametrize(("port", "taken"), [("8998", "prefill worker 0's --disaggregation-bootstrap-port"),
                                             ("30000", "the sglang-router front door")])
def test_a_port_a_disaggregated_topology_assigns_is_refused_naming_both(capsys: pytest.CaptureFixture[str],
                                                                         port: str, taken: str) -> None:
    """`render multinode.yaml --port 8998` exited 0 with `--port 8998 … --disaggregation-bootstrap-port 8998` on the
    prefill worker; `--port 30000` (the router's) was refused. Both are refused alike: exit 2, naming both."""
    recipe = REPO / "tests" / "data" / "recipes" / "disagg" / "multinode.yaml"
    code, out, err = run_main(capsys, "render", recipe, "--job", "dsr1_8k1k_fp8_sglang", "--port", port)
    assert code == 2, out + err
    assert f"both listen on port {port} of node 0" in err and f"not {port}: {taken} takes it" in err, err
    assert "--disaggregation-bootstrap-port" not in out
