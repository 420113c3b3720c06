"""Recipe values that YAML reads into something no launch can write are refused at load, at their line.

Found by an audit of the recipe → planned → rendered path: each case below passed `llmsweep validate` (exit 0) and
then failed later — a traceback in `render`, an internal error in `run` after the server was due to start, or a
rendered script that set another value than the recipe wrote.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.plan import full_sweep
from llmsweep.policy import validate_files
from llmsweep.spec import load_recipes, loads_recipes

REPO = Path(__file__).resolve().parents[3]
BASE = (REPO / "tests" / "data" / "recipes" / "run" / "fixed-sim.yaml").read_text(encoding="utf-8")
SERVE = "    engine: { name: sim }\n"


def _with_serve(lines: str) -> str:
    """The fixed-sim recipe with `lines` added to its `serve` block (written as YAML, as a user writes it)."""
    assert SERVE in BASE
    return BASE.replace(SERVE, SERVE + lines)


@pytest.mark.parametrize("written", [
    "{a: 2024-01-01}",
    "{a: 2024-01-01 10:00:00}",
    "{a: [1, 2024-01-01]}",
    "{a: {b: !!binary aGVsbG8=}}",
    "{a: !!set {x}}",
])
def test_a_flag_mapping_holding_what_json_cannot_write_is_refused_at_its_line(written: str, tmp_path: Path) -> None:
    """A mapping flag (vLLM's `--speculative-config`) is rendered as one JSON word; a date in it made `validate`
    print four `policy.internal` warnings and exit 0, and `render` end in `TypeError: Object of type date is not JSON
    serializable`."""
    text = _with_serve(f"    args:\n      --speculative-config: {written}\n")
    result = loads_recipes(text, "r.yaml")
    (finding,) = result.errors
    assert finding.rule == "schema.type" and finding.path == "run-sim-fixed.serve.args.--speculative-config"
    assert finding.line is not None and "--speculative-config" in text.splitlines()[finding.line - 1]
    assert "JSON cannot write" in finding.message and finding.fix and "quoted" in finding.fix
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text, encoding="utf-8")
    validation = validate_files([recipe])
    assert [f.rule for f in validation.findings if f.is_error] == ["schema.type"]
    assert not [f for f in validation.findings if f.rule == "policy.internal"]


def test_a_flag_mapping_of_json_values_still_renders_as_one_json_word() -> None:
    text = _with_serve('    args:\n      --speculative-config: {a: "2024-01-01", b: [1, 2.5, null, true], c: {d: x}}\n')
    result = loads_recipes(text, "r.yaml")
    assert not result.errors, [f.render() for f in result.errors]
    (job, _) = full_sweep(result.recipes)
    assert job.serve is not None
    assert job.serve.args["--speculative-config"] == {"a": "2024-01-01", "b": [1, 2.5, None, True], "c": {"d": "x"}}


@pytest.mark.parametrize(("lines", "path", "line"), [
    ('    env: { NCCL_DEBUG: "a\\0b" }\n', "run-sim-fixed.serve.env.NCCL_DEBUG", 19),
    ('    args: { --chat-template: "x\\x00y" }\n', "run-sim-fixed.serve.args.--chat-template", 19),
    ('    args: { --allowed-origins: [a, "b\\0"] }\n', "run-sim-fixed.serve.args.--allowed-origins[1]", 19),
    ('    model-path: "/models/w\\0"\n', "run-sim-fixed.serve.model-path", 19),
])
def test_a_nul_character_in_a_recipe_value_is_refused_at_its_line(lines: str, path: str, line: int,
                                                                   tmp_path: Path) -> None:
    """A `"\\0"` escape passed `validate` (exit 0); `run` then failed every job at launch with `internal error:
    ValueError: embedded null byte`, and `render --format sh` wrote `export NCCL_DEBUG=$'a\\x00b'`, which bash sets
    to `a`: the script set another value than the recipe wrote."""
    text = _with_serve(lines)
    assert text.splitlines()[line - 1] == lines.rstrip("\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text, encoding="utf-8")
    validation = validate_files([recipe])
    errors = [f for f in validation.findings if f.is_error]
    assert [(f.rule, f.path, f.line) for f in errors] == [("schema.nul", path, line)], [f.render() for f in errors]
    assert errors[0].fix and "\\0" in errors[0].fix
    assert not validation.jobs


def test_a_nul_character_in_a_recipe_key_is_refused() -> None:
    result = loads_recipes(BASE.replace("run-sim-fixed:", '"run-sim\\0fixed":'), "r.yaml")
    assert [(f.rule, f.line) for f in result.errors] == [("schema.nul", 3)], [f.render() for f in result.errors]
    assert not result.recipes


@pytest.mark.parametrize("lines", [
    "    args: { --allowed-origins: [] }\n",
    "    overrides:\n    - when: { tp: 8 }\n      args: { --allowed-origins: [] }\n",
])
def test_a_flag_given_an_empty_list_is_refused_not_rendered_bare(lines: str) -> None:
    """`--allowed-origins: []` was rendered as the bare `--allowed-origins`: a switch turned on, or a flag that takes
    values left without one (argparse refuses it), where the recipe wrote no value at all."""
    text = _with_serve(lines)
    result = loads_recipes(text, "r.yaml")
    (finding,) = result.errors
    assert finding.rule == "schema.type" and finding.path is not None
    assert finding.path.endswith("args.--allowed-origins") and "empty list" in finding.message
    assert finding.line is not None and "--allowed-origins" in text.splitlines()[finding.line - 1]
    assert finding.fix and "`null` to leave it out" in finding.fix


AGENTIC = (REPO / "tests" / "data" / "recipes" / "run" / "agentic-sim.yaml").read_text(encoding="utf-8")
SYNTH = "synthetic: { traces: 8, seed: 7, max-isl: 4000, max-osl: 200 }"


def test_a_synthetic_corpus_smaller_than_the_generator_scales_to_is_refused_at_load() -> None:
    """`synthetic: {max-isl: 2000}` passed `validate`; `run` then failed every agentic job with `internal error:
    ValidationError: 1 validation error for SynthProfile` (the generator scales its corpus to at least 2048 tokens)."""
    from llmsweep.workload.build import agentic_config

    assert SYNTH in AGENTIC
    text = AGENTIC.replace(SYNTH, SYNTH.replace("max-isl: 4000", "max-isl: 2000"))
    result = loads_recipes(text, "r.yaml")
    (finding,) = result.errors
    assert finding.rule == "schema.range" and finding.path == "run-sim-agentic.workload.traces.synthetic.max-isl"
    assert finding.line is not None and "max-isl: 2000" in text.splitlines()[finding.line - 1]
    assert "2048" in finding.message
    # the floor is the generator's: the smallest corpus the schema takes is one the workload builds
    text = AGENTIC.replace(SYNTH, SYNTH.replace("max-isl: 4000", "max-isl: 2048"))
    job = full_sweep(loads_recipes(text, "r.yaml").raise_on_error().recipes)[0]
    assert job.workload is not None
    assert agentic_config(job.workload, concurrency=1, tokenizer=None).synthetic is not None


@pytest.mark.parametrize("field", ["num-warmups", "num-prompts-per-conc", "num-prompts"])
def test_a_request_count_beyond_any_sweep_is_refused_at_its_line(field: str) -> None:
    """`num-warmups: 99999999999999999999` passed `validate`; `run` then failed every job with `internal error:
    OverflowError: Python int too large to convert to C ssize_t` (`num-prompts` of that size ran without end)."""
    counts = "    num-prompts-per-conc: 4\n    num-warmups: 1\n"
    assert counts in BASE
    text = BASE.replace(counts, f"    {field}: 99999999999999999999\n")
    result = loads_recipes(text, "r.yaml")
    (finding,) = result.errors
    assert finding.rule == "schema.range" and finding.path == f"run-sim-fixed.workload.{field}"
    assert finding.line is not None and field in text.splitlines()[finding.line - 1]
    assert "16777216" in finding.message
    ok = text.replace("99999999999999999999", "16777216")
    assert not loads_recipes(ok, "r.yaml").errors


def test_a_byte_order_mark_inside_the_file_is_refused_at_its_line(tmp_path: Path) -> None:
    """Two recipe files, each saved with a BOM, concatenated into one master: the second BOM became the first
    character of the second recipe key, so `--config-keys <key>` answered `not found … did you mean `<key>`?` with
    the two spellings identical on screen. A BOM at the start of the file is still read as YAML reads it."""
    second = BASE.replace("run-sim-fixed:", "run-sim-fixed-2:")
    master = tmp_path / "master.yaml"
    master.write_bytes(b"\xef\xbb\xbf" + BASE.encode() + b"\xef\xbb\xbf" + second.encode())
    result = validate_files([master])
    (finding,) = [f for f in result.findings if f.is_error]
    assert finding.rule == "schema.yaml-syntax" and finding.line == len(BASE.splitlines()) + 1
    assert "byte-order mark" in finding.message and finding.fix and "BOM" in finding.fix
    assert not result.jobs
    master.write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    assert validate_files([master]).ok and list(load_recipes([master]).recipes) == ["run-sim-fixed"]


@pytest.mark.parametrize(("lines", "path", "written", "kind"), [
    ('    env: { NCCL_DEBUG: INFO,\n           ON: "1" }\n', "run-sim-fixed.serve.env.ON", "ON", "a boolean (True)"),
    ('    env:\n      ~: "1"\n', "run-sim-fixed.serve.env.~", "~", "null (None)"),
    ("    args:\n      --mem-fraction-static: 0.75\n      5: 1\n", "run-sim-fixed.serve.args.5", "5", "an integer (5)"),
    ("    overrides:\n    - when: { tp: 8 }\n      env:\n        off: x\n", "run-sim-fixed.serve.overrides[0].env.off",
     "off", "a boolean (False)"),
])
def test_a_key_yaml_reads_as_another_type_is_named_as_written_at_its_line(lines: str, path: str, written: str,
                                                                         kind: str) -> None:
    """An environment variable named `ON` (YAML 1.1 reads it as `true`) was reported at its mapping's line as
    `serve.env[1]: \\`env[1]\\`: Input should be a valid string (got a boolean True)`, fix `write \\`True\\`
    (\\`env[1]\\`) as a string` — an index that is not in the file and a spelling the user did not write; a `~` key
    as `serve.env.[key]`, fix `write \\`[key]\\` as a string`."""
    text = _with_serve(lines)
    (finding,) = loads_recipes(text, "r.yaml").errors
    assert (finding.rule, finding.path) == ("schema.type", path), finding.render()
    assert finding.line is not None and text.splitlines()[finding.line - 1].strip().startswith(f"{written}:")
    assert f"key `{written}`" in finding.message and kind in finding.message
    assert finding.fix == f'quote the key: `"{written}": ...`'


def test_a_recipe_field_key_yaml_reads_as_a_boolean_is_named_as_written() -> None:
    text = BASE.replace("  multinode: false\n", "  multinode: false\n  on: 1\n")
    (finding,) = loads_recipes(text, "r.yaml").errors
    assert (finding.rule, finding.path, finding.line) == ("schema.type", "run-sim-fixed.on", 11), finding.render()
    assert "key `on`" in finding.message and finding.fix == 'quote the key: `"on": ...`'


@pytest.mark.parametrize(("lines", "flag"), [
    ("    args: { --mem-fraction-static: .nan }\n", "--mem-fraction-static"),
    ("    args: { --max-num-batched-tokens: .inf }\n", "--max-num-batched-tokens"),
    ("    args: { --cuda-graph-sizes: [1, -.inf] }\n", "--cuda-graph-sizes"),
    ("    args: { --speculative-config: {a: {b: .nan}} }\n", "--speculative-config"),
    ("    overrides:\n    - when: { tp: 8 }\n      args: { --mem-fraction-static: .inf }\n", "--mem-fraction-static"),
])
def test_a_flag_value_that_is_not_a_finite_number_is_refused_at_its_line(lines: str, flag: str) -> None:
    """`--mem-fraction-static: .nan` validated clean and rendered `--mem-fraction-static nan`, which SGLang's
    argparse (`type=float`) takes; inside a mapping it rendered `{"b":NaN}`, which is no JSON. A non-finite number is
    refused as every float CLI option and `acceptance-length` refuse one."""
    text = _with_serve(lines)
    (finding,) = loads_recipes(text, "r.yaml").errors
    assert finding.rule == "schema.type" and finding.path is not None and finding.path.endswith(f"args.{flag}")
    assert finding.line is not None and flag in text.splitlines()[finding.line - 1]
    assert "not finite" in finding.message and finding.fix


def test_the_word_inf_quoted_is_a_value() -> None:
    assert not loads_recipes(_with_serve('    args: { --foo: "inf", --bar: "1e400" }\n'), "r.yaml").errors


@pytest.mark.parametrize("written", ["1e400", "-1e400", "1E400", "1.0e400", "+1e+400"])
def test_a_number_beyond_a_float_written_without_a_point_is_refused_as_with_one(written: str) -> None:
    """`--max-num-seqs: 1e400` validated clean and rendered the word `1e400`, where `1.0e400` was refused as `inf`:
    a plain scalar is read as YAML 1.2's decimal forms, in which an exponent needs no decimal point."""
    (finding,) = loads_recipes(_with_serve(f"    args: {{ --max-num-seqs: {written} }}\n"), "r.yaml").errors
    assert finding.rule == "schema.type" and finding.path is not None and finding.path.endswith("--max-num-seqs")
    assert "not finite" in finding.message and ("`-inf`" if written.startswith("-") else "`inf`") in finding.message


@pytest.mark.parametrize(("written", "value"), [("1e3", 1000.0), ("-2E-2", -0.02), ("5e+0", 5.0)])
def test_an_exponent_without_a_point_is_a_float_as_in_yaml_1_2(written: str, value: float) -> None:
    from llmsweep.spec.source import parse_yaml

    assert parse_yaml(f"a: {written}\nb: '{written}'\n", "r.yaml").data == {"a": value, "b": written}


def test_an_override_when_boolean_matches_no_number_and_a_number_no_boolean() -> None:
    """`when: {tp: true}` applied its flags to the tp-1 arms and `when: {dp-attn: 0}` to the dp-attn-false ones
    (Python's `True == 1`), silently; such an override now matches nothing, which `plan.override-unused` reports."""
    from llmsweep.spec.serve import Serve

    serve = Serve.model_validate({"overrides": [
        {"when": {"tp": True}, "env": {"A": "1"}},
        {"when": {"dp-attn": 0}, "env": {"B": "1"}},
        {"when": {"dp-attn": [1, True], "tp": [8, 1]}, "env": {"C": "1"}},
    ]})
    assert serve.resolve({"tp": 1, "dp-attn": False}).applied_overrides == []
    assert serve.resolve({"tp": 1, "dp-attn": True}).applied_overrides == [2]
    assert serve.resolve({"tp": 8, "dp-attn": True}).env == {"C": "1"}
