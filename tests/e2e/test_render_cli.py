"""`llmsweep render`: the exact command and env of a job, as text, a runnable script or JSON; the simulator stand-in
starts from what render prints."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
RESIDENT_JOB = "qwen3.5_tp8_conc8_kvnone_spec-mtp"
HICACHE_JOB = "qwen3.5_tp8_conc8_kvdram-hicache_spec-mtp"


def render(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "render", str(SEED), *args],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, **(env or {})})


def test_seed_job_prints_the_sglang_command_and_env() -> None:
    out = render("--job", RESIDENT_JOB)
    assert out.returncode == 0, out.stderr
    flat = " ".join(out.stdout.replace("\\\n", " ").split())
    assert ("--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 "
            "--attention-backend triton --mem-fraction-static 0.75 --skip-server-warmup") in flat
    for assign in ("SGLANG_ENABLE_SPEC_V2=1", "SGLANG_SIMULATE_ACC_LEN=3.39",
                   "SGLANG_SIMULATE_ACC_METHOD=match-expected", "SGLANG_SIMULATE_ACC_TOKEN_MODE=real-draft-token"):
        assert assign in out.stdout.splitlines()
    assert "python3 -m sglang.launch_server" in flat and "# image: lmsysorg/sglang-rocm:v0.5.16" in out.stdout
    assert "golden-al.precision-provenance" in out.stderr


def test_a_failing_job_still_renders_with_its_findings_on_stderr_and_exits_2() -> None:
    """Printed for review, but not a success: `render --format sh > job.sh && bash job.sh` stops there."""
    out = render("--job", HICACHE_JOB)
    assert out.returncode == 2
    assert "error [engine.known-incompatibility]" in out.stderr
    assert "error: 1 error above: `run` refuses job qwen3.5_tp8_conc8_kvdram-hicache_spec-mtp" in out.stderr
    assert "--hicache-mem-layout layer_first" in out.stdout and "--hicache-size" in out.stdout


def test_a_job_whose_invocation_run_refuses_exits_2_and_names_the_other_recipes_error(tmp_path: Path) -> None:
    """`run` stops before any job when a recipe it was given does not load: render, given the same files, says so
    and exits 2, however clean the job it prints."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("other-recipe:\n  no-such-key: 1\n", encoding="utf-8")
    out = render(str(bad), "--job", RESIDENT_JOB, "--format", "sh")
    assert out.returncode == 2, out.stderr
    assert str(bad) in out.stderr and "error [" in out.stderr
    assert out.stdout.startswith("#!/usr/bin/env bash")  # still printed, for review
    assert f"error: 9 errors above: `run` refuses job {RESIDENT_JOB}" in out.stderr


def test_evals_only_over_a_file_whose_eval_is_another_files_row_says_so() -> None:
    """The seed's agentic eval is planned in recipes/…-resident.yaml (conc 32: eval rows are chosen across the folder,
    the matrix the seed belongs to): `render --evals-only` said the input "could not be parsed or planned"."""
    out = render("--evals-only", "--job", RESIDENT_JOB)
    assert out.returncode == 2, out.stderr
    assert "no job to render: --evals-only keeps only eval jobs, and no row of these recipes runs an eval" in out.stderr
    assert "could not be parsed" not in out.stderr


def test_unknown_job_lists_candidates() -> None:
    out = render("--job", "qwen3.5_tp8_conc4")
    assert out.returncode == 2 and "matches 2 jobs" in out.stderr and "Traceback" not in out.stderr
    out = render("--job", "nope")
    assert out.returncode == 2 and RESIDENT_JOB in out.stderr


def test_sh_format_is_a_runnable_script(tmp_path: Path) -> None:
    out = render("--job", RESIDENT_JOB, "--format", "sh")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0] == "#!/usr/bin/env bash" and "set -euo pipefail" in lines
    assert "export SGLANG_SIMULATE_ACC_LEN=3.39" in lines
    assert any(line.startswith("exec python3 -m sglang.launch_server") for line in lines)
    script = tmp_path / "serve.sh"
    script.write_text(out.stdout, encoding="utf-8")
    if shutil.which("bash"):
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0


def test_secrets_appear_by_name_only(tmp_path: Path) -> None:
    text = SEED.read_text(encoding="utf-8").replace(
        "    env:\n", "    secret-env: [HF_TOKEN]\n    env:\n", 1)
    recipe = tmp_path / "seed.yaml"
    recipe.write_text(text, encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "render", str(recipe), "--job", RESIDENT_JOB,
                          "--format", "sh"], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "HF_TOKEN": "hf_secret_value"})
    assert out.returncode == 0
    assert 'export HF_TOKEN="${HF_TOKEN:?' in out.stdout and "hf_secret_value" not in out.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(60)
def test_simulated_launch_starts_and_serves_health() -> None:
    port = _free_port()
    out = render("--job", HICACHE_JOB, "--simulate", "--format", "json", "--port", str(port))
    assert out.returncode == 0, out.stderr
    spec = json.loads(out.stdout)
    assert spec["engine"] == "sim" and spec["image"] is None and spec["metrics_prefix"] == "sglang:"
    assert "--kv-offload" in spec["argv"] and "--acceptance-length" in spec["argv"]
    assert "warning [engine.known-incompatibility]" in out.stderr  # the simulator runs what SGLang refuses
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
    proc = subprocess.Popen(spec["argv"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **spec["env"]})
    try:
        deadline = time.monotonic() + 45
        while True:
            try:
                with opener.open(f"http://127.0.0.1:{port}{spec['health_path']}", timeout=1) as resp:
                    assert resp.status == 200
                    break
            except OSError:
                assert proc.poll() is None, "simulator exited before becoming ready"
                assert time.monotonic() < deadline, "simulator not ready in 45 s"
                time.sleep(0.3)
        with opener.open(f"http://127.0.0.1:{port}{spec['metrics_path']}", timeout=5) as resp:
            assert "sglang:" in resp.read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=15)
