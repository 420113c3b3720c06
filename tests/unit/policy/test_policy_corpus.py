"""Each malformed recipe under tests/data/recipes/policy/ trips its policy rule, at its line, with its message.

Every file starts with `# expect: rule=<id> line=<n> message=<fragment>` (the spec corpus's format); the severity is
the one the rule registry declares (or the one its file asks for). A second line `# golden-al-dir: <dir>` (relative to
the file) adds a golden-AL curve folder, as `$LLMSWEEP_GOLDEN_AL_DIR` does. Every policy rule has a case.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llmsweep.catalog.golden import CURVES_ENV_VAR
from llmsweep.catalog.sources import clear_caches
from llmsweep.policy import all_rules, validate_files

CORPUS = Path(__file__).resolve().parents[2] / "data" / "recipes" / "policy"
EXPECT = re.compile(r"^# expect: rule=(?P<rule>\S+) line=(?P<line>\d+) message=(?P<message>.+)$")
CURVES = re.compile(r"^# golden-al-dir: (?P<dir>\S+)$")
NO_CASE = {"policy.internal"}
"""Rules no well-formed recipe can trip (they guard against adapter bugs)."""


def _cases() -> list[tuple[Path, str, int, str]]:
    out = []
    for path in sorted(CORPUS.glob("*.yaml")):
        match = EXPECT.match(path.read_text(encoding="utf-8").splitlines()[0])
        assert match, f"{path.name}: first line must be `# expect: rule=... line=... message=...`"
        out.append((path, match["rule"], int(match["line"]), match["message"].strip()))
    return out


CASES = _cases()


@pytest.mark.parametrize(("path", "rule_id", "line", "fragment"), CASES, ids=[c[0].stem for c in CASES])
def test_policy_case(path: Path, rule_id: str, line: int, fragment: str, monkeypatch: pytest.MonkeyPatch) -> None:
    curves = CURVES.match(path.read_text(encoding="utf-8").splitlines()[1])
    if curves:
        monkeypatch.setenv(CURVES_ENV_VAR, str((path.parent / curves["dir"]).resolve()))
    monkeypatch.chdir(CORPUS.parents[3])  # a `serve.model-path` of a case is relative to the repository's root
    clear_caches()
    try:
        result = validate_files([path])
    finally:
        monkeypatch.delenv(CURVES_ENV_VAR, raising=False)
        clear_caches()
    assert not [f for f in result.findings if f.rule.startswith("schema.")], "corpus recipes must pass the schema"
    hits = [f for f in result.findings if f.rule == rule_id]
    assert hits, f"{path.name}: no {rule_id}; got {[(f.rule, f.message) for f in result.findings]}"
    at_line = [f for f in hits if f.line == line]
    assert at_line, f"{path.name}: {rule_id} at lines {[f.line for f in hits]}, expected {line}"
    assert any(fragment in f.message for f in at_line), [f.message for f in at_line]
    rule = next(r for r in all_rules() if r.id == rule_id)
    assert at_line[0].fix and at_line[0].file == str(path)
    # a refusal's fix is the finding's fix, never a second line inside its message
    assert not [f.message for f in result.findings if "fix:" in f.message]
    if rule.severity.value == "error" and rule_id != "resources.hbm-fit":
        assert not result.ok


def test_every_policy_rule_has_a_case() -> None:
    covered = {c[1] for c in CASES}
    policy = {r.id for r in all_rules() if r.stage == "policy"}
    assert policy - covered - NO_CASE == set()


@pytest.mark.parametrize("flag", ["--port: 1234", "--host: 0.0.0.0", "--model-path: /other/model",
                                  "--model: /other/model"])
def test_every_flag_the_launch_decides_is_refused_from_serve_args(tmp_path: Path, flag: str) -> None:
    """SGLang's port, bind address and model path (`--model` is its abbreviation of `--model-path`): a recipe
    setting one serves where the run does not look, or another model under the job's name."""
    text = (CORPUS / "serve.launch-conflict.yaml").read_text(encoding="utf-8").replace("--port: 1234", flag)
    path = tmp_path / "recipe.yaml"
    path.write_text(text, encoding="utf-8")
    hits = [f for f in validate_files([path]).findings if f.rule == "serve.launch-conflict"]
    assert hits and hits[0].line == 20 and hits[0].is_error, flag


@pytest.mark.parametrize(("engine", "flag"), [
    *((engine, flag) for engine in ("sglang", "vllm", "atom", "sim")
      for flag in ("--served-model-name: foo", "--served_model_name: foo")),
    *((engine, "--served-model-na: foo") for engine in ("sglang", "vllm", "atom")),  # argparse's unique prefix
])
def test_a_served_model_name_flag_is_refused_with_the_workload_field_as_its_fix(tmp_path: Path, engine: str,
                                                                                 flag: str) -> None:
    """`--served-model-name: foo` replaced the launch's own while the client asked for the workload's name (the model
    id): HTTP 404 on every request. In any spelling the engine's parser resolves to it, it is the launch's."""
    text = (CORPUS / "serve.launch-conflict.yaml").read_text(encoding="utf-8").replace("--port: 1234", flag)
    text = text.replace("  serve:\n", f"  serve:\n    engine: {{ name: {engine} }}\n")
    path = tmp_path / "recipe.yaml"
    path.write_text(text, encoding="utf-8")
    hits = [f for f in validate_files([path]).findings if f.rule == "serve.launch-conflict"]
    assert hits and hits[0].line == 21 and hits[0].is_error, (engine, flag)
    assert hits[0].fix is not None and "workload.served-model-name" in hits[0].fix


@pytest.mark.parametrize(("flag", "typo"), [("--mem-fraction-static: 0.75", False), ("--mem-fraction: 0.75", False),
                                            ("--chunked-prefil-size: 8192", True), ("--tp-size: 8", False),
                                            ("--enable-hierarchical-cach: true", False),
                                            ("--enable-hierachical-cache: true", True), ("--my-new-flag: 1", False)])
def test_only_a_slip_of_a_listed_flag_is_called_a_typo(tmp_path: Path, flag: str, typo: bool) -> None:
    """A listed flag, a unique abbreviation of one, and a flag unlike any listed one pass; a letter off does not."""
    text = (CORPUS / "serve.flag-unknown.yaml").read_text(encoding="utf-8").replace("--mem-fracton-static: 0.75",
                                                                                     flag)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text, encoding="utf-8")
    hits = [f for f in validate_files([recipe]).findings if f.rule == "serve.flag-unknown"]
    assert bool(hits) == typo, [f.message for f in hits]


def test_pipeline_and_context_parallelism_an_engine_cannot_render_are_refused_per_server_and_per_worker() -> None:
    """ATOM ran TP4 on 4 of the 8 GPUs a `tp: 4, pp: 2` job counts; an SGLang prefill pool with pcp-size 2 took two
    nodes and ran TP8 across them: each is refused where it is written."""
    path = CORPUS.parent / "topology" / "unsupported.yaml"
    hits = {(f.line, f.path.rsplit(".", 1)[-1]) for f in validate_files([path]).findings
            if f.rule == "serve.topology-unsupported" and f.path is not None}
    assert hits == {(15, "pp"), (35, "pcp-size"), (36, "dcp-size")}


@pytest.mark.parametrize(("serve_lines", "mismatch"), [
    ("    args:\n      --default-chat-template-kwargs: '{\"enable_thinking\": false}'\n", True),
    ("    args:\n      --default-chat-template-kwargs: {enable_thinking: false}\n", True),
    ("    env:\n      DYN_DEFAULT_THINKING_MODE: disabled\n", True),
    ("    env:\n      DYN_DEFAULT_THINKING_MODE: enabled\n", False),
    ("    args:\n      --default-chat-template-kwargs: '{\"enable_thinking\": true}'\n", False),
    ("    args:\n      --max-num-seqs: 8\n", False),
])
def test_the_served_thinking_mode_must_be_the_one_the_golden_al_is_keyed_on(tmp_path: Path, serve_lines: str,
                                                                             mismatch: bool) -> None:
    """The golden AL is keyed on serve.spec-decoding.thinking (default on); a server told to default to thinking off
    would run at another acceptance than the pinned one (qwen3.5 MTP K=3: 3.39 on, 3.33 off)."""
    text = (CORPUS / "golden-al.thinking-mismatch.yaml").read_text(encoding="utf-8")
    text = text.split("    args:\n")[0] + serve_lines
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text, encoding="utf-8")
    hits = [f for f in validate_files([recipe]).findings if f.rule == "golden-al.thinking-mismatch"]
    assert bool(hits) == mismatch, [f.message for f in hits]


def test_a_job_planned_by_two_entries_or_two_scenarios_is_planned_twice_and_warned_at_both_lines(
        tmp_path: Path) -> None:
    """InferenceX plans a repeated point (lists are emitted verbatim), so llmsweep plans both jobs, and warns: an
    isl/osl block written twice planned 4 jobs in silence (a repeat inside one list already warned)."""
    text = (CORPUS / "grid.duplicate-arm.yaml").read_text(encoding="utf-8")
    block = "    - isl: 256\n      osl: 64\n      search-space:\n      - { tp: 8, conc-list: [2, 4] }\n"
    path = tmp_path / "twice.yaml"
    path.write_text(text.replace("      - { tp: 8, conc-list: [4, 8] }  #<- conc 4 again\n", block), encoding="utf-8")
    result = validate_files([path])
    assert len(result.jobs) == 4 and len({j.id for j in result.jobs}) == 4
    (hit,) = [f for f in result.findings if f.rule.startswith("grid.duplicate")]
    assert (hit.rule, hit.line, hit.severity.value) == ("grid.duplicate-arm", 19, "warning"), hit.render()
    assert "conc [2, 4] as the entry at line 15" in hit.message and hit.path and hit.path.endswith("fixed-seq-len[1]"
                                                                                                    ".search-space[0]")
