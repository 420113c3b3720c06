"""`llmsweep matrix`: stdout is only the JSON array, findings go to stderr, exit codes follow the input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MALFORMED = REPO / "tests" / "data" / "recipes" / "malformed"


def matrix(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "matrix", *args],
                          capture_output=True, text=True, cwd=cwd)


def test_default_config_files_are_the_project_recipes() -> None:
    out = matrix("full-sweep")
    assert out.returncode == 0, out.stderr
    entries = json.loads(out.stdout)
    assert len(entries) == 9 + 10
    assert {e["runner"] for e in entries} == {"cluster:mi300x-amds"}
    assert all("serve" not in e and "id" not in e for e in entries), "stdout is the pure InferenceX matrix"


def test_list_flags_take_space_separated_values_and_globs() -> None:
    out = matrix("test-config", "--config-keys", "qwen3.5-*-resident", "qwen3.5-fp8-mi300x-sglang-agentic-mtp",
                 "--conc", "4", "16", "--format", "ids")
    assert out.returncode == 0, out.stderr
    ids = out.stdout.split()
    assert len(ids) == 2 * 2 + 2 * 2
    assert all("_conc4_" in i or "_conc16_" in i for i in ids)


def test_jobs_format_carries_the_llmsweep_extensions() -> None:
    out = matrix("test-config", "--config-keys", "qwen3.5-fp8-mi300x-sglang-agentic-mtp", "--format", "jobs")
    assert out.returncode == 0, out.stderr
    jobs = json.loads(out.stdout)
    assert {j["engine"] for j in jobs} == {"sglang"}
    assert {j["acceptance"]["value"] for j in jobs} == {3.39}
    assert all(len(j["recipe-fingerprint"]) == 64 for j in jobs)


def test_schema_errors_go_to_stderr_with_file_line_and_exit_2() -> None:
    bad = MALFORMED / "unknown-key.yaml"
    out = matrix("full-sweep", "--config-files", str(bad))
    assert out.returncode == 2
    assert out.stdout == ""
    assert f"{bad}:15: error [schema.unknown-key]" in out.stderr
    assert "did you mean `kv-offload-backend`" in out.stderr


def test_yaml_syntax_error_exits_2_naming_the_line() -> None:
    out = matrix("full-sweep", "--config-files", str(MALFORMED / "yaml-syntax.yaml"))
    assert out.returncode == 2 and "yaml-syntax.yaml:16" in out.stderr


def test_unknown_runner_label_is_a_warning_not_an_error(tmp_path: Path) -> None:
    src = (REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp-resident.yaml").read_text()
    (tmp_path / "r.yaml").write_text(src.replace("cluster:mi300x-amds", "cluster:mi300x-elsewhere"))
    out = matrix("full-sweep", "--config-files", str(tmp_path / "r.yaml"))
    assert out.returncode == 0, out.stderr
    assert "warning [fleet.unknown-label]" in out.stderr
    assert {e["runner"] for e in json.loads(out.stdout)} == {"cluster:mi300x-elsewhere"}


def test_missing_recipes_directory_is_explained(tmp_path: Path) -> None:
    out = matrix("full-sweep", cwd=tmp_path)
    assert out.returncode == 2 and "./recipes" in out.stderr


def test_bad_flag_combinations_exit_2() -> None:
    assert matrix("full-sweep", "--no-evals", "--all-evals").returncode == 2
    out = matrix("full-sweep", "--min-conc", "32", "--max-conc", "8")
    assert out.returncode == 2 and "--min-conc must be less than or equal to --max-conc" in out.stderr


def test_runner_config_option(tmp_path: Path) -> None:
    runners = tmp_path / "runners.yaml"
    shutil.copy(REPO / "src" / "llmsweep" / "catalog" / "data" / "runners.yaml", runners)
    text = runners.read_text().replace("available-cpu-dram-mib: 2_321_924", "available-cpu-dram-mib: 1_000_000")
    runners.write_text(text)
    out = matrix("test-config", "--config-keys", "qwen3.5-fp8-mi300x-sglang-agentic-mtp", "--runner-config",
                 str(runners))
    assert out.returncode == 0, out.stderr
    assert {e["total-cpu-dram-gb"] for e in json.loads(out.stdout) if e["kv-offloading"] == "dram"} == {838}


def test_an_override_that_matches_no_arm_is_a_warning(tmp_path: Path) -> None:
    src = (REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml").read_text()
    narrowed = src.replace("when: { kv-offloading: dram }", "when: { kv-offloading: dram, tp: 4 }")
    (tmp_path / "r.yaml").write_text(narrowed)
    out = matrix("full-sweep", "--config-files", str(tmp_path / "r.yaml"))
    assert out.returncode == 0, out.stderr
    assert "warning [plan.override-unused]" in out.stderr and "r.yaml:46" in out.stderr
    clean = matrix("full-sweep")
    assert "override-unused" not in clean.stderr
    # only the eval rows, planned on purpose: the HiCache arm's override has no job then, and that is no mistake (a
    # copy outside recipes/, whose eval row is its own conc 16: within recipes/ it is the resident recipe's conc 32)
    (tmp_path / "seed.yaml").write_text(src)
    evals = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "render", str(tmp_path / "seed.yaml"),
                            "--evals-only", "--job", "qwen3.5_tp8_conc16"],
                           capture_output=True, text=True, cwd=REPO)
    assert evals.returncode == 0 and "_eval_" in evals.stdout, evals.stderr
    assert "override-unused" not in evals.stderr
