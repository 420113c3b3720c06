"""`al collect` reads each cell's acceptance from the `/metrics` of the server it launched, directly: with a proxy in
the environment (a cluster login node, a CI box) and none of `no_proxy` naming the server, the scrape went to the
proxy and every cell failed (`URLError: Connection refused`), no curve written."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_main

from llmsweep.catalog.golden import load_curve

REPO = Path(__file__).resolve().parents[3]
LLAMA = REPO / "tests" / "data" / "recipes" / "alcollect" / "llama-1b-ngram.yaml"


@pytest.mark.timeout(120)
def test_a_collection_with_a_proxy_in_the_environment_scrapes_its_server_directly(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens: a request through it is refused
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "golden"
    code, stdout, err = run_main(capsys, "al", "collect", LLAMA, "--simulate", "--prompts", "builtin", "--num-prompts",
                                 "1", "--output-len", "8", "--thinking", "off", "-k", "1", "--out", out)
    assert code == 0 and "URLError" not in err, (stdout, err)
    assert load_curve(out / "llama-1b_ngram.yaml").values["thinking_off"][1] > 1
