"""Nothing a recipe smuggles in ever executes: hostile strings in every recipe field that reaches a shell.

Recipes arrive as third-party pull requests. Names (env keys, secret-env entries, engine flags) are refused at load
with file:line; values are data and are quoted wherever rendered. The rendered artifacts — `render --format sh`,
`server_command.txt` (with the `docker run` line the docker executor launches), the Slurm batch script — are then
*run* with bash, the engine and docker replaced by a stub that records its argv and exits 0: no marker file may
appear, and every hostile value must reach the engine as one verbatim argument. One `llmsweep run` on the simulator
with hostile values in every free-text field checks job.json, file names and the dashboard.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from llmsweep import engines
from llmsweep.cli.render import render_sh
from llmsweep.engines.launch import LaunchSpec
from llmsweep.execute.docker import DockerLauncher
from llmsweep.execute.lifecycle import command_text
from llmsweep.execute.slurm import SlurmOptions, render_batch_script
from llmsweep.policy import validate_files
from llmsweep.spec import loads_recipes

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "tests" / "data" / "recipes" / "run" / "fixed-sim.yaml"
MARK = "@MARK@"
PAYLOADS: dict[str, str] = {
    "semicolon": f";touch {MARK}",
    "subshell": f"$(touch {MARK})",
    "backticks": f"`touch {MARK}`",
    "newline": f"x\ntouch {MARK}\n",
    "single-quote": f"'; touch {MARK}; echo '",
    "double-quote": f'"; touch {MARK}; echo "',
    "and": f"&& touch {MARK}",
    "pipe": f"| touch {MARK}",
    "ifs": f"${{IFS}}$(touch${{IFS}}{MARK})",
    "unicode": f"ünïcødé‐名前 $(touch {MARK}) \u202e",
    "html": f"</script><script>alert(1)</script><img src=x onerror=alert(1)>$(touch {MARK})",
    "terminal": f"x\x1b[2J\x1b]0;pwned\x07y $(touch {MARK})",  # escape sequences a terminal printing the file runs
}
ENGINES = ("sglang", "vllm", "sim")


def _base() -> dict[str, Any]:
    doc = yaml.safe_load(BASE.read_text(encoding="utf-8"))
    (recipe,) = doc.values()
    return copy.deepcopy(recipe)


def _dump(key: str, recipe: dict[str, Any]) -> str:
    return yaml.safe_dump({key: recipe}, sort_keys=False, allow_unicode=True)


# --------------------------------------------------------------------------------------------- names are refused


@pytest.mark.parametrize("payload", list(PAYLOADS), ids=list(PAYLOADS))
@pytest.mark.parametrize("where", ["env", "override-env", "secret-env", "args", "override-args"])
def test_a_hostile_name_is_refused_at_load_with_its_line(payload: str, where: str, tmp_path: Path) -> None:
    hostile = PAYLOADS[payload].replace(MARK, str(tmp_path / "pwned"))
    recipe = _base()
    serve = recipe["serve"]
    if where == "env":
        serve["env"] = {"NCCL_DEBUG": "INFO", f"NCCL_DEBUG{hostile}": "INFO"}
    elif where == "override-env":
        serve["overrides"] = [{"when": {"tp": 8}, "env": {f"X{hostile}": "1"}}]
    elif where == "secret-env":
        serve["secret-env"] = ["HF_TOKEN", f"HF_TOKEN{hostile}"]
    elif where == "args":
        serve["args"] = {"--mem-fraction-static": 0.8, f"--port{hostile}": 1}
    else:
        serve["overrides"] = [{"when": {"tp": 8}, "args": {f"--x{hostile}": 1}}]
    result = loads_recipes(_dump("k", recipe), "hostile.yaml")
    assert not result.recipes, "a recipe with a hostile name must not load"
    errors = result.errors
    assert len(errors) == 1, [e.render() for e in errors]
    finding = errors[0]
    expected = "schema.serve-flag" if "args" in where else "schema.env-name"
    assert finding.rule == expected, finding.render()
    assert finding.file == "hostile.yaml" and finding.line is not None and finding.fix
    assert finding.path is not None and finding.path.startswith("k.serve.")
    # The line points into the serve block, at the offending entry or its mapping.
    assert finding.line > _dump("k", recipe).splitlines().index("  serve:")


def test_an_image_that_is_not_an_image_reference_is_refused() -> None:
    for image in ("--privileged", "img:1;touch x", "img:1 $(id)", "img:1\nx", ""):
        recipe = _base()
        recipe["image"] = image
        result = loads_recipes(_dump("k", recipe), "hostile.yaml")
        assert [f.rule for f in result.errors] == ["schema.image"], (image, [f.render() for f in result.errors])
        assert result.errors[0].line == 2


# ------------------------------------------------------------------------------- values are quoted, never run


def _hostile_recipe(engine: str, hostile: str) -> str:
    """Every free-text recipe field a launch renders, set to `hostile` (names stay valid: they are refused)."""
    recipe = _base()
    recipe["model-prefix"] = f"qwen3.5{hostile}"
    recipe["runner"] = f"mi300x{hostile}"
    recipe["serve"] = {
        "engine": {"name": engine},
        "model-path": f"/models/w{hostile}",
        "load-format": f"dummy{hostile}",
        "secret-env": ["HF_TOKEN"],
        "env": {"NCCL_DEBUG": hostile, "PLAIN": f"a b {hostile}"},
        "args": {"--chat-template": hostile, "--tokenizer": f"t{hostile}"},
        "overrides": [{"when": {"tp": 8}, "env": {"OVERRIDDEN": hostile}, "args": {"--trust-remote-code": True}}],
    }
    return _dump(f"key{hostile}", recipe)


def _stubs(tmp_path: Path, names: list[str]) -> tuple[Path, Path]:
    """A bin directory whose commands record their argv (one NUL-terminated word each) and exit 0."""
    stub_dir, log = tmp_path / "bin", tmp_path / "argv.log"
    stub_dir.mkdir(exist_ok=True)
    for name in names:
        stub = stub_dir / name
        stub.write_text(f"#!/bin/sh\nprintf '%s\\0' \"$0\" \"ENV:NCCL_DEBUG=$NCCL_DEBUG\" \"$@\" >> {log}\nexit 0\n",
                        encoding="utf-8")
        stub.chmod(0o755)
    return stub_dir, log


def _run_bash(script: str, tmp_path: Path, stub_dir: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "script.sh"
    path.write_text(script, encoding="utf-8")
    env = {"PATH": f"{stub_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "HF_TOKEN": "hf-test-value",
           "LANG": "C.UTF-8"}
    return subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, timeout=30, cwd=tmp_path,
                          check=False)


def _no_raw_control_characters(text: str) -> None:
    """A file a user may `cat` holds no raw control character (ESC, BEL, a bidi override) but its line ends: a value
    that has one is written `$'…'`."""
    bad = [line for line in text.split("\n") if not line.isprintable()]
    assert not bad, f"raw control characters in: {bad!r}"


def _argv_words(log: Path) -> list[str]:
    return log.read_bytes().decode("utf-8").split("\0") if log.exists() else []


def _spec_for(engine: str, hostile: str, tmp_path: Path) -> tuple[LaunchSpec, str]:
    path = tmp_path / "recipe.yaml"
    path.write_text(_hostile_recipe(engine, hostile), encoding="utf-8")
    report = validate_files([path])
    assert report.loaded.recipes, [f.render() for f in report.findings]
    job = report.jobs[0]
    spec = engines.render(job, simulate=engine == "sim", port=8123)
    # The engine replaced by a no-op: an absolute argv[0] (the simulator's python) becomes a name the stub PATH has.
    spec = spec.model_copy(update={"argv": ("engine-stub", *spec.argv[1:])})
    return spec, render_sh(job, spec)


@pytest.mark.parametrize("payload", list(PAYLOADS), ids=list(PAYLOADS))
@pytest.mark.parametrize("engine", ENGINES)
def test_rendered_scripts_run_nothing_a_recipe_value_smuggles_in(engine: str, payload: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    hostile = PAYLOADS[payload].replace(MARK, str(marker))
    spec, script = _spec_for(engine, hostile, tmp_path)
    stub_dir, log = _stubs(tmp_path, ["engine-stub", "docker", "env"])

    # 1. `llmsweep render --format sh`: exports then exec of the engine.
    _no_raw_control_characters(script)
    proc = _run_bash(script, tmp_path, stub_dir)
    assert not marker.exists(), f"render --format sh executed a recipe value:\n{script}"
    assert proc.returncode == 0, proc.stderr
    words = _argv_words(log)
    assert f"ENV:NCCL_DEBUG={hostile}" in words, "the hostile env value must reach the engine verbatim, as data"
    if engine != "sim":  # the simulator does not take --chat-template
        assert f"--chat-template\0{hostile}\0" in "\0".join(words) + "\0", "…and an argument as one argv word"
    log.unlink()

    # 2. server_command.txt, with the `docker run` line the docker executor launches.
    text = command_text(spec.model_copy(update={"image": spec.image or "ghcr.io/llmsweep/sim:1"}), DockerLauncher())
    _no_raw_control_characters(text)  # the docker line too: it was shlex.join, which leaves them raw
    proc = _run_bash(text, tmp_path, stub_dir)
    assert not marker.exists(), f"server_command.txt executed a recipe value:\n{text}"
    assert proc.returncode == 0, proc.stderr
    words = _argv_words(log)
    docker_run = words.index("run") if "run" in words else -1
    assert docker_run > 0 and f"NCCL_DEBUG={hostile}" in words[docker_run:], "docker gets `-e NAME=value` whole"
    assert f"ENV:NCCL_DEBUG={hostile}" in words[:docker_run], "server_command.txt's engine line sets it verbatim"

    # 3. The Slurm batch script (its worker reads the launch from JSON; the worker here is a stub).
    batch = render_batch_script(spec.model_copy(update={"image": None}),
                                SlurmOptions(python=str(stub_dir / "python3"), import_env={"X": hostile}),
                                name=f"g{hostile}", group_file=tmp_path / "group.json", out_dir=tmp_path,
                                launcher_file=tmp_path / "launch.json")
    (stub_dir / "python3").write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    (stub_dir / "python3").chmod(0o755)
    _no_raw_control_characters(batch)
    batch = batch.replace("${SLURM_JOB_ID}", "1")
    proc = _run_bash(batch, tmp_path, stub_dir)
    assert not marker.exists(), f"the Slurm batch script executed a recipe value:\n{batch}"
    assert proc.returncode == 0, proc.stderr


def test_an_invalid_name_reaching_a_renderer_is_still_inert(tmp_path: Path) -> None:
    """Second line of defence: a LaunchSpec built around the loader (a plugin, a future field) with a hostile name."""
    marker = tmp_path / "pwned"
    spec = LaunchSpec(engine="vllm", argv=("vllm", "serve", "m"), port=8000, image="vllm/vllm-openai:v0.26.0",
                      env={f"A;touch {marker};B": "1", "OK": f"$(touch {marker})"},
                      secret_env=("HF_TOKEN", f"X$(touch {marker})"))
    stub_dir, _log = _stubs(tmp_path, ["vllm", "env"])
    for text in (spec.shell_command(), command_text(spec, DockerLauncher())):
        _run_bash(text, tmp_path, stub_dir)
        assert not marker.exists(), text
    job = SimpleNamespace(id="j")  # render_sh reads only the id
    _run_bash(render_sh(job, spec), tmp_path, stub_dir)  # type: ignore[arg-type]
    assert not marker.exists()


# ------------------------------------------------------------- a real run: job.json, file names, the dashboard

SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+")
"""What a hostile run's file names may hold: the README's promise, and all the job-id sanitiser (`plan.names.safe`)
leaves of recipe text (this allowed `+=@` too, which nothing writes)."""


def _strings(doc: Any) -> list[str]:
    if isinstance(doc, dict):
        return [s for k, v in doc.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(doc, list):
        return [s for v in doc for s in _strings(v)]
    return [doc] if isinstance(doc, str) else []


def test_a_run_with_hostile_values_writes_safe_names_and_an_inert_dashboard(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    hostile = "/../" + "".join(PAYLOADS[p] for p in ("semicolon", "subshell", "backticks", "newline", "html",
                                                     "single-quote", "unicode")).replace(MARK, str(marker))
    recipe = _base()
    recipe["model-prefix"] = f"qwen3.5{hostile}"
    recipe["runner"] = f"mi300x{hostile}"
    recipe["serve"]["env"] = {"NCCL_DEBUG": hostile}
    recipe["serve"]["args"] = {"--mem-fraction-static": 0.8}
    recipe["workload"]["served-model-name"] = f"m{hostile}"
    path = tmp_path / "recipe.yaml"
    path.write_text(_dump(f"key{hostile}", recipe), encoding="utf-8")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({"labels": {recipe["runner"]: ["node-0"]}}, allow_unicode=True), encoding="utf-8")
    out = tmp_path / "out"
    env = {**os.environ, "LLMSWEEP_STORE": str(tmp_path / "store.sqlite"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "run", str(path), "--runner-config", str(fleet),
                           "--out", str(out)], env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path,
                          check=False)
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert not marker.exists()
    files = [p for p in out.rglob("*")]
    assert files and all(p.resolve().is_relative_to(out.resolve()) for p in files)
    bad = [str(p.relative_to(out)) for p in files if not SAFE_NAME.fullmatch(p.name)]
    assert bad == [], "file names carry recipe text unsanitised"
    job_dirs = [p for p in (out / "jobs").iterdir() if p.is_dir()]
    assert len(job_dirs) == 2 and all(len(p.name) < 255 for p in job_dirs)
    for job_dir in job_dirs:
        job = json.loads((job_dir / "job.json").read_text(encoding="utf-8"))
        assert hostile in _strings(job), "job.json keeps the value verbatim, as data"
    html = "".join(p.read_text(encoding="utf-8", errors="replace") for p in (out / "report").rglob("*.html"))
    assert html, "the run wrote a dashboard"
    assert "alert(1)" in html, "the hostile value is on the dashboard (escaped), so this checks something"
    assert "<script>alert(1)</script>" not in html and "<img src=x onerror" not in html
