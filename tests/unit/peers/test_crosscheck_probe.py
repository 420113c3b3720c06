"""`peer crosscheck` asks the endpoint before either client runs, with the probe `bench` makes
(`client.probe.require_endpoint`): nothing answering at --url is exit 2 within seconds, nothing run and nothing
written, where both clients used to run against it (~10 s, exit 1) and both runs were labelled `source: measured`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.cli import run_main

from llmsweep.client import probe as probe_module
from llmsweep.peers import crosscheck as crosscheck_module

DEAD = "http://127.0.0.1:1"  # nothing listens on port 1


def _args(url: str, out: Path, aiperf: Path, *extra: str) -> list[str | Path]:
    return ["peer", "crosscheck", "--url", url, "--model", "m", "--tokenizer", "builtin", "--isl", "8", "--osl", "2",
            "--concurrency", "1", "--repeats", "1", "--aiperf", aiperf, "--out", out, *extra]


def _no_load(*_: Any, **__: Any) -> None:
    raise AssertionError("a client was run")


def test_a_crosscheck_against_a_url_where_nothing_answers_is_refused_before_either_client_runs(
        tmp_path: Path, aiperf: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crosscheck_module, "_run_llmsweep", _no_load)
    monkeypatch.setattr(crosscheck_module, "_run_aiperf", _no_load)
    out = tmp_path / "cc"
    code, stdout, err = run_main(capsys, *_args(DEAD, out, aiperf))
    assert code == 2 and stdout == "", (stdout, err)
    assert "error: nothing answers at http://127.0.0.1:1 (/health connection refused); no load was sent" in err, err
    assert "fix: start the server, or check --url" in err
    assert not out.exists()


def test_what_the_probe_says_before_load_is_said_as_bench_says_it(
        tmp_path: Path, aiperf: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A --model the server does not list but takes, and a --gpus its own count contradicts: stderr says both before
    any load, as `bench` does; the runs divide by --gpus, as given."""
    said = probe_module.EndpointProbe(root="http://h", answered=True, ready=True, gpus=8,
                                      gpus_from="sim /version: tp 8",
                                      notes=("--model 'm' is not among the ids /v1/models lists",))
    monkeypatch.setattr(probe_module, "require_endpoint", lambda *_, **__: said)
    monkeypatch.setattr(crosscheck_module, "_run_llmsweep", lambda *_: None)
    monkeypatch.setattr(crosscheck_module, "_run_aiperf", lambda *_: None)
    out = tmp_path / "cc"
    code, _, err = run_main(capsys, *_args("http://h", out, aiperf, "--gpus", "2"))
    assert code == 1, err  # neither stand-in measured anything
    assert "--model 'm' is not among the ids /v1/models lists" in err
    assert "warning: --gpus 2, but the server reports 8 (sim /version: tp 8)" in err
    assert err.index("warning: --gpus 2") < err.index("conc 1 llmsweep #0")
