"""Every malformed recipe is a clear error: the rule, file:line and the field path, exit 2, no traceback, in bounded
time and memory. The recipes are generated here from a valid one (tests/data/recipes/run/fixed-sim.yaml), one
mistake each, as a careless or hostile contributor would write them.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmsweep.cli.main import main

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "tests" / "data" / "recipes" / "run" / "fixed-sim.yaml"
SECONDS = 5.0
"""Each validation must answer within this (the alias bomb used to take 17 s and 3 GB)."""
MEMORY = 2 * 1024**3
"""Address-space cap of the subprocess cases: an expansion that needs gigabytes fails the test, not the machine."""

# (case id, text replaced, replacement, expected rule, field the path must end with)
EDITS: list[tuple[str, str, str, str, str]] = [
    ("osl-zero", "osl: 64", "osl: 0", "schema.range", "osl"),
    ("osl-negative", "osl: 64", "osl: -1", "schema.range", "osl"),
    ("isl-huge", "isl: 256", "isl: 99999999999", "schema.range", "isl"),
    ("conc-huge", "conc-list: [2, 4]", "conc-list: [2, 1000000000]", "schema.range", "conc-list"),
    ("conc-zero", "conc-list: [2, 4]", "conc-list: [0]", "schema.conc-positive", "conc-list"),
    ("conc-bool", "conc-list: [2, 4]", "conc-list: [true]", "schema.type", "conc-list[0]"),
    ("tp-zero", "tp: 8,", "tp: 0,", "schema.range", "tp"),
    ("tp-negative", "tp: 8,", "tp: -8,", "schema.range", "tp"),
    ("tp-bool", "tp: 8,", "tp: true,", "schema.type", "tp"),
    ("tp-string", "tp: 8,", 'tp: "8",', "schema.type", "tp"),
    ("tp-float", "tp: 8,", "tp: 8.0,", "schema.type", "tp"),
    ("ep-zero", "tp: 8,", "tp: 8, ep: 0,", "schema.range", "ep"),
    ("dp-attn-int", "tp: 8,", "tp: 8, dp-attn: 1,", "schema.type", "dp-attn"),
    ("num-prompts-bool", "num-prompts-per-conc: 4", "num-prompts-per-conc: true", "schema.type",
     "num-prompts-per-conc"),
    ("port-string", "engine: { name: sim }", 'engine: { name: sim }\n    port: "8000"', "schema.type", "port"),
    ("model-prefix-empty", "model-prefix: qwen3.5", 'model-prefix: ""', "schema.range", "model-prefix"),
    ("isl-beyond-context", "isl: 256", "isl: 300000", "input.context-length", "isl"),
    ("unknown-model", "model: Qwen/Qwen3.5-397B-A17B-FP8", "model: example/NoSuchModel-7B", "input.unknown-model",
     "model"),
    ("unknown-runner", "runner: mi300x", "runner: mi300x-typo", "fleet.unknown-label", "runner"),
    ("tp-not-dividing-node", "tp: 8,", "tp: 3,", "resources.gpu-divisibility", "tp"),
    ("tp-over-node", "tp: 8,", "tp: 16,", "resources.gpus-per-node", "tp"),
    ("ep-not-dividing-tp", "tp: 8,", "tp: 8, ep: 3,", "resources.gpu-divisibility", "ep"),
    ("ep-over-tp", "tp: 8,", "tp: 4, ep: 8,", "resources.gpu-divisibility", "ep"),
    ("fp4-on-fp8-checkpoint", "precision: fp8", "precision: fp4", "input.precision-checkpoint", "precision"),
    ("image-empty", "image: lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730", 'image: ""', "schema.image",
     "image"),
    ("image-untagged", "image: lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730", "image: lmsysorg/sglang-rocm",
     "schema.image", "image"),
    ("image-flag", "image: lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730", 'image: "--privileged"',
     "schema.image", "image"),
    ("api-key-arg", "engine: { name: sim }", "engine: { name: sim }\n    args: { --api-key: sk-0123456789abcdef }",
     "schema.secret-arg", "--api-key"),
    ("hf-token-arg", "engine: { name: sim }", "engine: { name: sim }\n    args: { --hf-token: hf_0123456789 }",
     "schema.secret-arg", "--hf-token"),
    ("token-value", "engine: { name: sim }",
     "engine: { name: sim }\n    args: { --tokenizer: hf_AbCdEfGhIjKlMnOpQrStUvWx }",
     "schema.secret-arg", "--tokenizer"),
    ("env-name-injection", "engine: { name: sim }",
     'engine: { name: sim }\n    env: { "NCCL_DEBUG;touch /tmp/x;X": INFO }', "schema.env-name",
     "NCCL_DEBUG;touch /tmp/x;X"),
    ("secret-env-injection", "engine: { name: sim }", 'engine: { name: sim }\n    secret-env: ["$(id)"]',
     "schema.env-name", "secret-env[0]"),
    ("flag-injection", "engine: { name: sim }", 'engine: { name: sim }\n    args: { "--port 1; id": 1 }',
     "schema.serve-flag", "--port 1; id"),
]

BOMB = "".join(f"{chr(97 + i)}: &{chr(97 + i)} [" + ",".join([f"*{chr(96 + i)}"] * 9 if i else ['"lol"'] * 9) + "]\n"
               for i in range(9))
# (case id, file text or bytes, expected rule, whether the finding has a line)
WHOLE_FILES: list[tuple[str, str | bytes, str, bool]] = [
    ("alias-bomb", BOMB, "schema.yaml-limits", True),
    ("recursive-alias", "a: &a [*a]\n", "schema.yaml-limits", True),
    ("deep-nesting", "k: " + "[" * 20000 + "]" * 20000 + "\n", "schema.yaml-limits", True),
    ("deep-mapping", "k: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n", "schema.yaml-limits", True),
    ("many-aliases", "x: &x 1\nk: [" + ", ".join(["*x"] * 5000) + "]\n", "schema.yaml-limits", True),
    ("not-utf8", b"k:\n  image: \xff\xfe\n", "schema.yaml-syntax", True),  # line 2: where the bytes are
]


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    text = BASE.read_text(encoding="utf-8")
    assert old in text, old
    path = tmp_path / "recipe.yaml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def _validate(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, object]], float]:
    """`llmsweep validate --json` in this process: any exception but the exit is a traceback and fails the test."""
    started = time.monotonic()
    with pytest.raises(SystemExit) as exit_info:
        main(["validate", "--json", str(path)])
    elapsed = time.monotonic() - started
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return int(exit_info.value.code or 0), json.loads(out.out), elapsed


def test_the_base_recipe_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    rc, found, _ = _validate(BASE, capsys)
    assert rc == 0 and not [f for f in found if f["severity"] == "error"], found


@pytest.mark.parametrize(("case", "old", "new", "rule", "field"), EDITS, ids=[e[0] for e in EDITS])
def test_a_malformed_recipe_is_an_error_at_its_field(case: str, old: str, new: str, rule: str, field: str,
                                                     tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _variant(tmp_path, old, new)
    rc, found, elapsed = _validate(path, capsys)
    assert rc == 2, found
    errors = [f for f in found if f["severity"] == "error"]
    hits = [f for f in errors if f["rule"] == rule]
    assert hits, f"expected {rule}; got {[(f['rule'], f['path'], f['message']) for f in errors]}"
    finding = hits[0]
    assert str(finding["path"]).endswith(field), finding
    assert finding["file"] == str(path) and isinstance(finding["line"], int) and finding["fix"]
    written = path.read_text(encoding="utf-8").splitlines()[int(finding["line"]) - 1]
    anchor = field.split(".")[-1].split("[")[0].strip('"')
    assert anchor in written or anchor[:12] in written, f"line {finding['line']} is `{written}`, not the field"
    assert elapsed < SECONDS


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _cli(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *args], capture_output=True, text=True,
                          timeout=60, preexec_fn=_limited, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")}, check=False)
    return proc, time.monotonic() - started


@pytest.mark.parametrize(("case", "content", "rule", "has_line"), WHOLE_FILES, ids=[w[0] for w in WHOLE_FILES])
def test_a_hostile_file_is_refused_quickly_in_little_memory(case: str, content: str | bytes, rule: str,
                                                           has_line: bool, tmp_path: Path) -> None:
    path = tmp_path / "hostile.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    proc, elapsed = _cli("validate", "--json", str(path))
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 2, proc.stderr[-3000:]
    (finding,) = [f for f in json.loads(proc.stdout) if f["severity"] == "error"]
    assert finding["rule"] == rule and finding["file"] == str(path) and finding["fix"]
    assert (finding["line"] is not None) == has_line
    # Interpreter start-up included; the 700-byte bomb used to take 17 s and 3 GB.
    assert elapsed < 2 * SECONDS, elapsed


def test_a_policy_error_makes_run_exit_2_before_any_server(tmp_path: Path) -> None:
    path = _variant(tmp_path, "tp: 8,", "tp: 8, ep: 3,")
    out = tmp_path / "out"
    env = {**os.environ, "LLMSWEEP_STORE": str(tmp_path / "store.sqlite")}
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "run", str(path), "--out", str(out),
                           "--no-report"], capture_output=True, text=True, timeout=120, env=env, check=False)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "resources.gpu-divisibility" in proc.stderr
    assert not (out / "jobs").exists() or not any((out / "jobs").iterdir()), "no job ran"


@pytest.mark.parametrize("command", [["run", "--no-report"], ["al", "collect", "--simulate", "--prompts", "builtin"]],
                         ids=["run", "al-collect"])
def test_a_recipe_that_cannot_be_expanded_stops_a_command_that_launches(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A recipe that loads but cannot be planned (a HiCache arm wider than its runner's 8-GPU node) stops `run` and
    `al collect` alike (one check, `Validation.raise_unrunnable`): exit 2, the `plan.failed` finding at its file and
    line with its fix, nothing started or written."""
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    recipe = tmp_path / "wide.yaml"
    text = (REPO / "examples" / "quickstart.yaml").read_text(encoding="utf-8")
    old = "{ tp: 8, spec-decoding: mtp, kv-offloading: dram"
    assert old in text
    recipe.write_text(text.replace(old, "{ tp: 16, spec-decoding: mtp, kv-offloading: dram"), encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        main([*command, str(recipe), "--out", str(out)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    line = next(n for n, text in enumerate(recipe.read_text().splitlines(), 1) if "{ tp: 16," in text)
    assert f"{recipe}:{line}: error [plan.failed]" in err and "exceeds gpus-per-node=8" in err, err  # the arm's line
    assert "fix: KV-offload arms must fit one node" in err and "Traceback" not in err
    assert not out.exists()
