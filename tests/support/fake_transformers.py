"""A stand-in for `transformers serve` on any CPU: a `transformers` module whose CLI answers the rendered serve
command with the streaming test server (`support.stream_server`), and a `python3` shim that runs it with this
interpreter. Lets `llmsweep run --executor local` launch a real engine's command line without torch."""

from __future__ import annotations

import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

FAKE_SERVE = """import argparse, os, sys, time
sys.path.insert(0, {tests!r})
from support.stream_server import ServerConfig, StreamServer
ap = argparse.ArgumentParser()
ap.add_argument("command")
ap.add_argument("model")
ap.add_argument("--port", type=int, default=8000)
args, _ = ap.parse_known_args()
fault = os.environ.get("LLMSWEEP_TEST_FAULT") or None
StreamServer(ServerConfig(itl_s=0.002, usage="final_chunk", fault=fault, fault_every=1 if fault else 0),
             port=args.port).start()
print("INFO:     Application startup complete.", flush=True)  # (uvicorn prints it before the bind)
print(f"INFO:     Uvicorn running on http://127.0.0.1:{{args.port}} (Press CTRL+C to quit)", flush=True)
while True:
    time.sleep(3600)
"""
"""The stand-in's `transformers.cli.transformers`: `LLMSWEEP_TEST_FAULT` names a fault every request gets."""


def stand_in_env(tmp_path: Path, *, version: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a CLI run whose `transformers serve` is the stand-in (written under `tmp_path`), plus
    `extra`. `version`: the `transformers.__version__` the stand-in has (what the launch's interpreter is read to
    have installed, `execute.host_engine`); None: none can be read."""
    fake = tmp_path / "fake"
    pkg = fake / "transformers" / "cli"
    pkg.mkdir(parents=True)
    (fake / "transformers" / "__init__.py").write_text(f"__version__ = {version!r}\n" if version else "")
    (pkg / "__init__.py").write_text("")
    (pkg / "transformers.py").write_text(FAKE_SERVE.format(tests=str(TESTS)))
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (shim / "python3").chmod(0o755)
    return {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": f"{fake}{os.pathsep}{REPO / 'src'}", **extra}
