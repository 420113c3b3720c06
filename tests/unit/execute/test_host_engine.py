"""The host engine's version, read before a launch from the interpreter the launch would run (`run --reuse` of a job
served on the host: no image pins that build)."""

from __future__ import annotations

import sys
from pathlib import Path

from llmsweep.engines.launch import LaunchSpec
from llmsweep.execute.host_engine import host_engine_version, launch_interpreter


def _spec(engine: str, *argv: str, path: Path) -> LaunchSpec:
    return LaunchSpec(engine=engine, argv=argv, env={"PATH": str(path)}, port=8000, health_path="/health")


def _dist(site: Path, name: str, version: str) -> None:
    """An installed distribution's metadata (what importlib.metadata reads), without its code."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_the_version_is_the_one_the_launchs_interpreter_has_installed(tmp_path: Path) -> None:
    """`python3 -m sglang.launch_server`: the `python3` on the launch's PATH; `vllm serve`: the interpreter the
    console script's `#!` line names. Each reads the distribution's metadata, as the engine's own import would find
    it (here a PYTHONPATH folder holding only the metadata)."""
    bin_dir, site = tmp_path / "bin", tmp_path / "site"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    (bin_dir / "vllm").write_text("#!/usr/bin/env python3\nimport sys\n")
    (bin_dir / "vllm").chmod(0o755)
    _dist(site, "sglang", "0.5.99")
    _dist(site, "vllm", "0.27.1")
    env = {"PATH": str(bin_dir), "PYTHONPATH": str(site)}
    sglang = _spec("sglang", "python3", "-m", "sglang.launch_server", path=bin_dir)
    vllm = _spec("vllm", "vllm", "serve", "/models/m", path=bin_dir)
    assert launch_interpreter(sglang, str(bin_dir)) == str(bin_dir / "python3")
    assert launch_interpreter(vllm, str(bin_dir)) == str(bin_dir / "python3")
    assert host_engine_version(sglang, env) == "0.5.99"
    assert host_engine_version(vllm, env) == "0.27.1"
    # not installed for that interpreter, or no interpreter to ask: unreadable, never a guess
    assert host_engine_version(_spec("atom", "python3", "-m", "atom.entrypoints.openai_server", path=bin_dir),
                               env) is None
    assert host_engine_version(_spec("vllm", "vllm", "serve", "m", path=tmp_path / "none"), env) is None
    assert host_engine_version(_spec("sim", "python3", "-m", "llmsweep", path=bin_dir), env) is None
