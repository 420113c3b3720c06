"""`peer crosscheck --out` is one cross-check's for the whole run (`folderlock`, as `bench` and `run` claim theirs).
Before, it claimed nothing: a second cross-check given the folder of a live one with `--force` ran its load into it,
and the second's runs were tabled under the first's labels (its endpoint, its levels)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_main

from llmsweep.folderlock import claim
from llmsweep.peers import crosscheck as crosscheck_module

URL = "http://127.0.0.1:9"  # nothing is sent: every case is refused before any load


def _args(out: Path, aiperf: Path, *extra: str) -> list[str | Path]:
    return ["peer", "crosscheck", "--url", URL, "--model", "m", "--tokenizer", "builtin", "--isl", "8", "--osl", "2",
            "--concurrency", "1", "--repeats", "1", "--aiperf", aiperf, "--out", out, *extra]


def _no_load(*_: Any, **__: Any) -> None:
    raise AssertionError("a run was started")


@pytest.mark.parametrize("force", [False, True])
def test_a_crosscheck_into_a_folder_a_live_process_holds_is_refused_before_any_probe(
        tmp_path: Path, aiperf: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        force: bool) -> None:
    out = tmp_path / "cc"
    monkeypatch.setattr(crosscheck_module, "_served", _no_load)
    with claim(out, "llmsweep peer crosscheck", fix="x"):
        code, stdout, err = run_main(capsys, *_args(out, aiperf, *(["--force"] if force else [])))
    assert code == 2, (stdout, err)
    assert f"another `llmsweep peer crosscheck` is using {out} (pid {os.getpid()})" in err, err
    assert "fix: wait for it to finish, or pass a new folder to --out" in err
    assert "--force: replacing" not in err and not (out / "c1").exists()


@pytest.mark.parametrize("force", [False, True])
def test_a_folder_claimed_while_the_endpoint_was_probed_is_refused_under_the_claim(
        tmp_path: Path, aiperf: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        force: bool) -> None:
    """The window the first check leaves (the endpoint probe): a cross-check that claims the folder then keeps it;
    this one, `--force` or not, runs no load into it."""
    out = tmp_path / "cc"
    monkeypatch.setattr(crosscheck_module, "_run_llmsweep", _no_load)
    monkeypatch.setattr(crosscheck_module, "_run_aiperf", _no_load)
    with contextlib.ExitStack() as stack:
        def probed_then_claimed(_cfg: Any) -> Any:
            stack.enter_context(claim(out, "llmsweep peer crosscheck", fix="x"))  # another, while this one probed
            return crosscheck_module._Served("measured", 1, {})

        monkeypatch.setattr(crosscheck_module, "_served", probed_then_claimed)
        code, stdout, err = run_main(capsys, *_args(out, aiperf, *(["--force"] if force else [])))
    assert code == 2 and f"another `llmsweep peer crosscheck` is using {out}" in err, (stdout, err)
    assert not (out / "crosscheck.json").exists() and not (out / "c1").exists()


def test_a_crosscheck_written_while_the_endpoint_was_probed_is_not_replaced_without_force(
        tmp_path: Path, aiperf: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "cc"
    monkeypatch.setattr(crosscheck_module, "_run_llmsweep", _no_load)

    def probed_then_written(_cfg: Any) -> Any:
        out.mkdir()
        (out / "crosscheck.json").write_text("{}")  # another cross-check finished meanwhile
        return crosscheck_module._Served("measured", 1, {})

    monkeypatch.setattr(crosscheck_module, "_served", probed_then_written)
    code, stdout, err = run_main(capsys, *_args(out, aiperf))
    assert code == 2 and f"--out {out} already holds a cross-check (crosscheck.json)" in err, (stdout, err)
    assert (out / "crosscheck.json").read_text() == "{}"
