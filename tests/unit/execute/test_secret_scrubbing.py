"""Secret values must never reach a written file, however the server's output is chunked."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.execute.secrets import SecretScrubber, collect_secrets

TOKEN = "hf_abcdefghijklmnopqrstuvwxyz0123"


def test_scrub_replaces_every_occurrence_and_longest_first() -> None:
    scrubber = SecretScrubber([TOKEN, "abc", ""])
    text = f"HF_TOKEN={TOKEN} again {TOKEN} and abc"
    assert scrubber.scrub(text) == "HF_TOKEN=*** again *** and ***"
    assert scrubber.scrub_bytes(text.encode()) == b"HF_TOKEN=*** again *** and ***"


def test_write_text_scrubs_artifacts(tmp_path: Path) -> None:
    path = SecretScrubber([TOKEN]).write_text(tmp_path / "sub" / "server_command.txt", f"vllm serve --token {TOKEN}\n")
    assert path.read_text() == "vllm serve --token ***\n"


@pytest.mark.parametrize("cut", range(1, len(TOKEN)))
def test_stream_masks_secret_split_across_chunks(cut: int) -> None:
    stream = SecretScrubber([TOKEN]).stream()
    data = f"token is {TOKEN} ok\n".encode()
    split = data.index(TOKEN.encode()) + cut
    out = stream.feed(data[:split]) + stream.feed(data[split:]) + stream.flush()
    assert out == b"token is *** ok\n"


def test_stream_does_not_hold_back_ordinary_output() -> None:
    stream = SecretScrubber([TOKEN]).stream()
    assert stream.feed(b"server ready\n") == b"server ready\n"
    assert stream.feed(b"partial line without newline") == b"partial line without newline"


def test_stream_flush_masks_a_dangling_secret_prefix() -> None:
    stream = SecretScrubber([TOKEN]).stream()
    emitted = stream.feed(b"cut off: " + TOKEN[:10].encode())
    assert TOKEN[:10].encode() not in emitted + stream.flush()


def test_collect_secrets_takes_values_by_name_and_skips_missing(caplog: pytest.LogCaptureFixture) -> None:
    found = collect_secrets(["HF_TOKEN", "MISSING_KEY"], {"HF_TOKEN": TOKEN, "OTHER": "x"})
    assert found == {"HF_TOKEN": TOKEN}
    assert "MISSING_KEY" in caplog.text


def test_server_environment_scrubs_declared_and_secret_looking_values() -> None:
    from llmsweep.engines.launch import LaunchSpec
    from llmsweep.execute.base import server_environment

    spec = LaunchSpec(engine="vllm", argv=("vllm",), port=1, secret_env=("HF_TOKEN",), env={"VLLM_X": "1"})
    environ = {"HF_TOKEN": TOKEN, "WANDB_API_KEY": "wandb-secret-42", "SHORT_KEY": "1", "PATH": "/bin"}
    env, scrubber = server_environment(spec, environ)
    assert env["HF_TOKEN"] == TOKEN and env["VLLM_X"] == "1" and env["PATH"] == "/bin"
    line = f"HF_TOKEN={TOKEN} WANDB_API_KEY=wandb-secret-42 SHORT_KEY=1 PATH=/bin"
    assert scrubber.scrub(line) == "HF_TOKEN=*** WANDB_API_KEY=*** SHORT_KEY=1 PATH=/bin"
