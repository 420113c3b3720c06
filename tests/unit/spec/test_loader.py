"""Recipe loading: InferenceX masters load unchanged, our extensions validate, locations are exact."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.spec import (
    MultiNodeRecipe,
    SingleNodeRecipe,
    engine_name,
    load_recipes,
    recipe_json_schema,
)
from llmsweep.spec.loader import loads_recipes
from llmsweep.spec.serve import Serve

REPO = Path(__file__).resolve().parents[3]


def test_inferencex_master_loads_unchanged_and_is_plannable_not_runnable(shared_dir: Path) -> None:
    master = shared_dir / "reference" / "inferencex" / "amd-master.yaml"
    result = load_recipes([master])
    assert result.ok, [f.render() for f in result.errors]
    assert len(result.recipes) == 56
    assert sum(isinstance(r, MultiNodeRecipe) for r in result.recipes.values()) == 11
    warnings = [f for f in result.findings if f.rule == "spec.not-runnable"]
    assert len(warnings) == 56 and all(not f.is_error for f in warnings)
    assert not any(r.runnable for r in result.recipes.values())


def test_project_recipes_load_clean_and_runnable() -> None:
    result = load_recipes([REPO / "recipes"])
    assert result.ok and not result.findings, [f.render() for f in result.findings]
    assert set(result.recipes) == {"qwen3.5-fp8-mi300x-sglang-agentic-mtp",
                                   "qwen3.5-fp8-mi300x-sglang-agentic-mtp-resident"}
    assert all(r.runnable for r in result.recipes.values())


def test_field_lines_are_reachable_from_a_recipe() -> None:
    path = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
    recipe = load_recipes([path]).recipes["qwen3.5-fp8-mi300x-sglang-agentic-mtp"]
    lines = path.read_text().splitlines()
    line = recipe.line_of(("scenarios", "agentic-coding", 0, "search-space", 1, "kv-offload-backend"))
    assert line is not None and "kv-offload-backend" in lines[line - 1] and "dram" in lines[line - 1]
    mem = recipe.line_of("serve.args.--mem-fraction-static")
    assert mem is not None and "--mem-fraction-static" in lines[mem - 1]
    assert recipe.line_of("serve.args.--not-written") == recipe.line_of("serve.args"), "falls back to the parent"
    full = "qwen3.5-fp8-mi300x-sglang-agentic-mtp.scenarios.agentic-coding[0].dram-utilization"
    dram = recipe.source.line_of(full)
    assert dram is not None and "dram-utilization" in lines[dram - 1]
    assert recipe.path_of(("serve", "env")) == "qwen3.5-fp8-mi300x-sglang-agentic-mtp.serve.env"


def test_duplicate_keys_across_files_are_errors(tmp_path: Path) -> None:
    src = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
    copy = tmp_path / "copy.yaml"
    copy.write_text(src.read_text())
    result = load_recipes([src, copy])
    (finding,) = result.errors
    assert finding.rule == "schema.duplicate-recipe" and finding.file == str(copy) and finding.line == 10
    assert "Duplicate configuration keys" in finding.message


def test_missing_file_is_a_finding(tmp_path: Path) -> None:
    result = load_recipes([tmp_path / "absent.yaml"])
    assert [f.rule for f in result.errors] == ["schema.file"]
    assert "does not exist" in result.errors[0].message


def test_all_problems_of_a_file_are_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text(
        "a:\n  image: i:1\n  model: m\n  model-prefix: p\n  precision: fp8\n  framework: sglang\n  runner: h200\n"
        "  multinode: false\n  scenarios:\n    fixed-seq-len:\n    - isl: 1024\n      osl: 1024\n      search-space:\n"
        "      - { tp: 8, conc-start: 8, conc-end: 4 }\n"
        "b:\n  image: i:1\n  model: m\n  precision: fp8\n  framework: sglang\n  runner: h200\n  multinode: false\n"
        "  scenarios:\n    fixed-seq-len:\n    - isl: 1024\n      osl: 1024\n      search-space:\n"
        "      - { tp: 8, conc-list: [4], tpp: 2 }\n"
    )
    result = load_recipes([path])
    assert sorted((f.rule, f.line) for f in result.errors) == [
        ("schema.conc-range", 14), ("schema.missing", 15), ("schema.unknown-key", 27)]
    assert result.recipes == {}


def test_readme_example_recipe_is_valid(tmp_path: Path) -> None:
    import re

    text = (REPO / "recipes" / "README.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block is not None
    path = tmp_path / "example.yaml"
    path.write_text(block.group(1))
    result = load_recipes([path])
    assert result.ok and not result.findings, [f.render() for f in result.findings]


@pytest.mark.parametrize(("framework", "engine"), [
    ("sglang", "sglang"), ("vllm", "vllm"), ("trt", "trtllm"), ("atom", "atom"), ("sim", "sim"),
    ("dynamo-sglang", "sglang"), ("dynamo-vllm", "vllm"), ("dynamo-trt", "trtllm"), ("sglang-disagg", "sglang"),
    ("atom-disagg", "atom"), ("llmd-vllm", "vllm"), ("tilert", None), ("mystery", None),
])
def test_engine_name(framework: str, engine: str | None) -> None:
    assert engine_name(framework) == engine


def test_serve_overrides_match_arms_and_null_removes() -> None:
    serve = Serve.model_validate({
        "args": {"--page-size": 16, "--enable-metrics": True},
        "env": {"A": 1},
        "overrides": [
            {"when": {"kv-offloading": "dram"}, "args": {"--page-size": 1, "--enable-metrics": None}},
            {"when": {"tp": [4, 8], "kv-offloading": "dram"}, "env": {"A": None, "B": "x"}},
        ],
    })
    resident = serve.resolve({"kv-offloading": "none", "tp": 8})
    assert resident.args == {"--page-size": 16, "--enable-metrics": True} and resident.env == {"A": "1"}
    offload = serve.resolve({"kv-offloading": "dram", "tp": 8})
    assert offload.args == {"--page-size": 1} and offload.env == {"B": "x"} and offload.applied_overrides == [0, 1]
    assert serve.resolve({"kv-offloading": "dram", "tp": 2}).applied_overrides == [0]


def test_an_overrides_flag_replaces_the_flag_however_it_was_spelled() -> None:
    """`--x: 8` overridden by `--x=16: true` (or the other way round) is one flag, the override's: the merged args held
    both spellings, which the resolved serve block refused as a flag given twice — a traceback from validate, render
    and run, for a recipe that loaded."""
    serve = Serve.model_validate({
        "args": {"--max-running-requests": 8, "--chunked-prefill-size=4096": True},
        "overrides": [{"when": {"tp": 8}, "args": {"--max-running-requests=16": True,
                                                   "--chunked-prefill-size": 8192}}],
    })
    assert serve.resolve({"tp": 8}).args == {"--max-running-requests=16": True, "--chunked-prefill-size": 8192}
    assert serve.resolve({"tp": 4}).args == {"--max-running-requests": 8, "--chunked-prefill-size=4096": True}


OVERRIDE_SECRET = """\
k:
  image: lmsysorg/sglang:v0.5.12-rocm700-mi35x
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: mi355x
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - { isl: 1024, osl: 256, search-space: [{ tp: 8, conc-list: [4] }] }
  serve:
    secret-env: [HF_TOKEN]
    overrides:
    - when: { tp: 8 }
      env: { HF_TOKEN: abcdefgh }
"""


def test_an_override_writing_a_secret_envs_value_is_a_finding_at_its_line(tmp_path: Path) -> None:
    """It was refused only when the arm resolved: a pydantic traceback from validate, render and run."""
    path = tmp_path / "r.yaml"
    path.write_text(OVERRIDE_SECRET)
    result = load_recipes([path])
    (error,) = result.errors
    assert error.rule == "schema.secret-in-env" and error.line == 16, error.render()  # its env line
    assert "overrides[0].env.HF_TOKEN" in error.render() and not result.recipes


def test_yaml_on_off_thinking_reads_as_on_off(tmp_path: Path) -> None:
    text = (REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml").read_text()
    path = tmp_path / "r.yaml"
    path.write_text(text.replace('thinking: "on"', "thinking: off"))
    recipe = load_recipes([path]).recipes["qwen3.5-fp8-mi300x-sglang-agentic-mtp"]
    assert isinstance(recipe, SingleNodeRecipe)
    assert recipe.serve is not None and recipe.serve.spec_decoding is not None
    assert recipe.serve.spec_decoding.thinking == "off"


def test_json_schema_describes_recipes_and_extensions() -> None:
    schema = recipe_json_schema()
    defs = schema["$defs"]
    assert {"SingleNodeRecipe", "MultiNodeRecipe", "Serve", "WorkloadSpec"} <= set(defs)
    props = defs["SingleNodeRecipe"]["properties"]
    assert {"image", "model-prefix", "scenarios", "serve", "workload"} <= set(props)
    assert defs["SingleNodeRecipe"]["additionalProperties"] is False
    assert "description" in props["serve"] or "description" in defs["Serve"]


def test_loads_recipes_from_text_names_the_given_file() -> None:
    from llmsweep.spec import loads_recipes

    text = (REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp-resident.yaml").read_text()
    assert set(loads_recipes(text).recipes) == {"qwen3.5-fp8-mi300x-sglang-agentic-mtp-resident"}
    bad = loads_recipes(text.replace("conc-list: [4, 16", "conc-lst: [4, 16"), file="inline.yaml")
    assert {(f.rule, f.file, f.line) for f in bad.errors} == {("schema.unknown-key", "inline.yaml", 16),
                                                              ("schema.unknown-key", "inline.yaml", 17)}


def test_a_file_larger_than_any_recipe_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    """A 68 MB file named .yaml took 31 s to be read and parsed; `validate /dev/zero` read until MemoryError. A file
    past 16 MiB (`spec.source.MAX_BYTES`) is a `schema.yaml-limits` finding (the other files still load)."""
    max_bytes = 16 * 2**20
    big = tmp_path / "big.yaml"
    with big.open("w", encoding="utf-8") as f:  # comments only: read whole, it was an empty file, said nowhere
        line = "#" * 1023 + "\n"
        f.write(line * (max_bytes // len(line) + 1))
    src = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
    result = load_recipes([big, src])
    (finding,) = result.errors
    assert finding.rule == "schema.yaml-limits" and finding.file == str(big), finding.render()
    assert "larger than 16 MiB" in finding.message and "pass the recipe file itself" in (finding.fix or "")
    assert list(result.recipes) == ["qwen3.5-fp8-mi300x-sglang-agentic-mtp"]


def test_validate_of_an_endless_stream_ends_with_the_finding(tmp_path: Path) -> None:
    import resource
    import subprocess
    import sys

    def cap() -> None:  # without the read limit, this would take the machine's memory
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    proc = subprocess.run([sys.executable, "-m", "llmsweep", "validate", "/dev/zero"], capture_output=True, text=True,
                          timeout=60, preexec_fn=cap, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "/dev/zero: error [schema.yaml-limits]" in proc.stdout + proc.stderr


@pytest.mark.parametrize(("al", "ok"), [(4.0, True), (1.0, True), (4.01, False), (50.0, False)])
def test_a_pinned_acceptance_length_lies_in_one_to_k_plus_one(al: float, ok: bool) -> None:
    """`acceptance-length: 50` with `num-steps: 11` (no golden curve to differ from) rendered
    SGLANG_SIMULATE_ACC_LEN=50 with no finding; a verify step accepts at most K drafts plus one."""
    sd = {"method": "eagle", "num-steps": 3, "acceptance-length": al, "acceptance-length-source": "run 1"}
    if ok:
        assert Serve.model_validate({"spec-decoding": sd}).spec_decoding is not None
    else:
        with pytest.raises(ValueError, match=r"is above K \+ 1 = 4 for `num-steps: 3`"):
            Serve.model_validate({"spec-decoding": sd})


def test_an_unquoted_date_in_serve_env_is_told_to_be_quoted_as_written() -> None:
    """`A_DATE: 2024-01-01` is a YAML date: the fix said to write `A_DATE: "a,b"` (the list/mapping example)."""
    from llmsweep.spec import loads_recipes

    text = (REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp-resident.yaml").read_text(encoding="utf-8")
    anchor = '      SGLANG_ENABLE_SPEC_V2: "1"\n'
    assert anchor in text
    for written in ("2024-01-01", "2024-01-01 10:00:00"):
        result = loads_recipes(text.replace(anchor, anchor + f"      A_DATE: {written}\n"), "r.yaml")
        (finding,) = result.errors
        assert finding.rule == "schema.type" and finding.path is not None and finding.path.endswith("env.A_DATE")
        assert f"an unquoted `{written}` reads as one" in finding.message, finding.message
        assert finding.fix == f'quote it: `A_DATE: "{written}"`', finding.fix


def test_an_environment_value_read_as_a_number_is_the_text_as_written(tmp_path: Path) -> None:
    """A variable is text: `C: 1.10` reached the engine as `1.1`, `D: +5` as `5`, a long float as `1e+20`."""
    path = tmp_path / "r.yaml"
    path.write_text(OVERRIDE_SECRET.replace(
        "    secret-env: [HF_TOKEN]\n",
        "    env: { C: 1.10, D: +5, H: 100000000000000000000.0, E: 7, Q: '1.10' }\n").replace(
        "HF_TOKEN: abcdefgh", "O: 2.50"))
    result = load_recipes([path])
    assert result.ok, [f.render() for f in result.errors]
    serve = result.recipes["k"].serve
    assert serve is not None
    assert serve.env == {"C": "1.10", "D": "+5", "H": "100000000000000000000.0", "E": "7", "Q": "1.10"}
    assert serve.resolve({"tp": 8}).env["O"] == "2.50"


@pytest.mark.parametrize(("written", "read_as"), [("ON", "a boolean (True)"), ("yes", "a boolean (True)"),
                                                  ("~", "null (None)"), ("5", "an integer (5)")])
def test_a_top_level_key_yaml_reads_as_another_type_is_named_as_written_at_its_line(written: str,
                                                                                    read_as: str) -> None:
    """README: a key YAML reads as another type (`ON:`, `~:`, `5:`) is named as written, at its own line, with the fix
    (quote it), at the top of the file as under `serve.env`. The recipe key was reported as `True`/`None` and, for a
    boolean or null, at no line."""
    text = "ok:\n  image: x\n" + f"{written}:\n  image: lmsysorg/sglang:v0.5.16\n"
    result = loads_recipes(text, "r.yaml")
    found = [f for f in result.findings if f.rule == "schema.type"]
    assert len(found) == 1, [f.render() for f in result.findings]
    assert found[0].line == 3 and found[0].path == written
    assert found[0].message == f"recipe key `{written}` is read by YAML as {read_as}, not as a string"
    assert found[0].fix == f'quote the key: `"{written}": ...`'
