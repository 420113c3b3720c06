"""`llmsweep bench` as a user runs it, on what a benchmark engineer gets wrong: exit statuses and words."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_main
from support.stream_server import ServerConfig, StreamServer


def test_an_out_that_cannot_be_made_is_refused_before_any_load(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`--out` under a file (or on a read-only or missing mount): the folder was first made by the run, after the
    endpoint probe, and failed there as a traceback with exit status 1, the status of a failed gate."""
    (tmp_path / "a-file").write_text("x")
    with StreamServer(ServerConfig(itl_s=0.0005)) as srv:
        code, out, err = run_main(capsys, "bench", "fixed", "--url", srv.url, "--model", "m", "--isl", "16",
                                  "--osl", "4", "--concurrency", "2", "--num-prompts", "4",
                                  "--out", tmp_path / "a-file" / "out")
        served = len(srv.served)
    assert code == 2, (out, err)
    file = tmp_path / "a-file"
    assert f"--out {file / 'out'} cannot be written: {file} is a file, not a folder" in err
    assert "Traceback" not in err and served == 0


def test_checking_that_out_can_be_made_leaves_no_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The check tries the folder and takes it back: a refused endpoint still leaves no --out behind."""
    out = tmp_path / "new" / "deeper" / "out"
    with StreamServer(ServerConfig(itl_s=0.0005)) as srv:
        url = srv.url
    code, _, err = run_main(capsys, "bench", "fixed", "--url", url, "--model", "m", "--isl", "16", "--osl", "4",
                            "--concurrency", "2", "--num-prompts", "4", "--out", out)
    assert code == 2 and "nothing answers at" in err, err
    assert not (tmp_path / "new").exists()


def test_a_models_answer_nested_past_the_json_decoders_depth_is_no_list(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`/v1/models` answering JSON nested 100,000 arrays deep: the probe's decoder raised RecursionError, a traceback
    out of `bench` before any load. Such an answer is no list of models, as any other unreadable one."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    deep = b"[" * 100_000 + b"]" * 100_000

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                             b"Connection: close\r\n\r\n" % len(deep) + deep)

    threading.Thread(target=serve, daemon=True).start()
    from llmsweep.client.probe import probe_endpoint

    try:
        probe = probe_endpoint(f"http://127.0.0.1:{listener.getsockname()[1]}")
    finally:
        listener.close()
    assert probe.ready and probe.models is None and probe.gpus is None
