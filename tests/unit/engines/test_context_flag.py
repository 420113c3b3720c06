"""A recipe flag that sets the engine's context length is read as the engine's parser reads it, refused below what the
job sends, and what the launch then runs is what job.json records.

`serve.args: {--context-length: 100}` on an isl 256 / osl 64 SGLang job validated clean, replaced the adapter's
`--context-length 576` and left job.json saying max-model-len 576 (vLLM's `--max-model-len: 100` likewise)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.catalog.models import find_model
from llmsweep.engines import launched_job
from llmsweep.plan import Job
from llmsweep.policy import validate_files

RECIPE = """k:
  image: IMAGE
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: mi300x
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 256
      osl: 64
      search-space:
      - { tp: 8, conc-list: [4] }
  serve:
    engine: { name: ENGINE }
    args: ARGS
"""
IMAGES = {"sglang": "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730", "vllm": "vllm/vllm-openai:v0.26.0",
          "trtllm": "nvcr.io/nvidia/tensorrt-llm/release:1.2.0", "atom": "rocm/atom:v0.1.0"}
NEED = 256 + 64 + 256


def _text(engine: str, args: str) -> str:
    return RECIPE.replace("IMAGE", IMAGES[engine]).replace("ENGINE", engine).replace("ARGS", args)


def _context_hits(tmp_path: Path, engine: str, args: str) -> list:
    path = tmp_path / "r.yaml"
    path.write_text(_text(engine, args), encoding="utf-8")
    return [f for f in validate_files([path]).findings if f.rule == "serve.context-conflict"]


@pytest.mark.parametrize(("engine", "flag"), [
    ("sglang", "--context-length"), ("sglang", "--max-model-len"), ("sglang", "--context-len"),
    ("vllm", "--max-model-len"), ("vllm", "--max-model"), ("vllm", "--max_model_len"),
    ("trtllm", "--max_seq_len"), ("trtllm", "--max-seq-len"), ("atom", "--max-model-len"),
])
def test_a_context_below_what_the_job_sends_is_refused_in_every_spelling(tmp_path: Path, engine: str,
                                                                         flag: str) -> None:
    (hit,) = _context_hits(tmp_path, engine, f"{{{flag}: 100}}")
    assert hit.is_error and f"`{flag}: 100`" in hit.message and str(NEED) in hit.message
    assert hit.fix is not None and str(NEED) in hit.fix and hit.line == RECIPE.count("\n")


@pytest.mark.parametrize("args", [f"{{--max-model-len: {NEED}}}", "{--max-model-len: 8192}", "{}"])
def test_a_context_at_least_what_the_job_needs_passes(tmp_path: Path, args: str) -> None:
    assert not _context_hits(tmp_path, "vllm", args)


@pytest.mark.parametrize(("engine", "value", "takes"), [
    ("sglang", "8k", None), ("trtllm", "auto", None), ("atom", "8k", "whole number only"),
    ("vllm", "8.5K", "32k, 32K or auto"), ("vllm", "lots", "32k, 32K or auto"), ("vllm", "1.5", "32k, 32K or auto"),
])
def test_a_context_that_is_no_number_of_tokens_its_engine_takes_is_refused(tmp_path: Path, engine: str, value: str,
                                                                           takes: str | None) -> None:
    """SGLang's and TensorRT-LLM's parsers take a whole number; vLLM's also `32k`/`32K`/`auto`, but no decimal with a
    binary suffix (`8.5K`). The fix's example is a value alone, the context the job plans (its isl + osl + 256: 576);
    what else the parser takes is said in the message."""
    flag = engines.get_adapter(engine).context_flag
    (hit,) = _context_hits(tmp_path, engine, f"{{{flag}: {value}}}")
    assert hit.is_error and f"`{flag}: {value}` is no number of tokens" in hit.message
    assert takes is None or takes in hit.message, hit.message
    assert hit.fix == f"write `{flag}` as a number of tokens, e.g. `{flag}: 576`"


@pytest.mark.parametrize(("value", "parsed"), [("auto", False), ("32k", False), ("-1", True), ("0", True)])
def test_atom_takes_a_whole_number_of_tokens_only(tmp_path: Path, value: str, parsed: bool) -> None:
    """ATOM's `--max-model-len` is argparse `type=int` (ROCm/ATOM atom/model_engine/arg_utils.py): `auto` and `32k`
    fail at start-up, and -1 (vLLM's `auto`) or 0 is taken as a length (`Config` keeps the least of it and the
    checkpoint's positions). -1 was read as a context of -1 tokens: refused only where a fixed-seq-len job's need
    was compared with it, and recorded as the launch's context otherwise. Each is refused, saying that ATOM fits no
    context to its memory and what to write: the fix's example is the value alone (it had read `--max-model-len: 8192
    (a whole number: ATOM's parser takes no `auto`, …)`, backticks inside backticks), and -1 and 0 are not said to be
    numbers ATOM's parser refuses (argparse takes them)."""
    (hit,) = _context_hits(tmp_path, "atom", f"{{--max-model-len: '{value}'}}")
    assert hit.is_error and "fits no context to its memory" in hit.message, hit.message
    if parsed:
        assert f"`--max-model-len: {value}` is no context length ATOM serves" in hit.message, hit.message
        assert "keeps it as the length itself" in hit.message and "parser takes" in hit.message
    else:
        assert f"`--max-model-len: {value}` is no number of tokens ATOM's parser takes" in hit.message, hit.message
        assert "whole number only" in hit.message
    assert hit.fix == "write `--max-model-len` as a number of tokens, e.g. `--max-model-len: 576`"
    atom = engines.get_adapter("atom")
    assert atom.read_context(value) is None
    assert atom.read_context(" 8192 ") == atom.read_context(8192) == 8192


NATIVE = 262_144
"""Qwen3.5-397B's native context in the model catalog (its checkpoint's max_position_embeddings)."""


@pytest.mark.parametrize(("written", "context"), [(300_000, NATIVE), (NATIVE, NATIVE), (8192, 8192), (None, NEED)])
def test_an_atom_launch_records_the_context_atom_serves(plan: Callable[[str], list[Job]], written: int | None,
                                                       context: int) -> None:
    """ATOM serves min(--max-model-len, the checkpoint's max_position_embeddings) (ROCm/ATOM atom/config.py) without
    a word, and its /v1/models reports no length: job.json said the recipe's 300,000 tokens where ATOM served the
    model's 262,144. The launch still carries the recipe's flag as written; what it records is what ATOM serves, and
    the simulator standing in for ATOM serves the same."""
    from llmsweep.sim.serve_args import engine_config_from_argv

    assert find_model("Qwen/Qwen3.5-397B-A17B-FP8").native_context == NATIVE  # type: ignore[union-attr]
    args = "{}" if written is None else f"{{--max-model-len: {written}}}"
    (job,) = plan(_text("atom", args))
    assert launched_job(job).max_model_len == context
    argv = engines.render(job).argv
    assert argv[argv.index("--max-model-len") + 1] == str(written or NEED)
    (simulated,) = plan(_text("atom", args).replace("engine: { name: atom }", "engine: { name: sim }")
                        .replace("framework: sglang", "framework: atom"))
    sim_argv = engines.render(simulated, simulate=True).argv
    assert engine_config_from_argv(sim_argv).context_length == context


@pytest.mark.parametrize(("args", "capped"), [
    ("{--max-model-len: 300000}", True), (f"{{--max-model-len: {NATIVE}}}", False),
    ("{--max-model-len: 8192}", False), ("{}", False),
])
def test_an_atom_context_over_the_models_is_warned_with_the_length_to_write(tmp_path: Path, args: str,
                                                                          capped: bool) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(_text("atom", args), encoding="utf-8")
    hits = [f for f in validate_files([path]).findings if f.rule == "serve.context-capped"]
    if not capped:
        assert not hits
        return
    (hit,) = hits
    assert not hit.is_error and "300,000 tokens" in hit.message and f"{NATIVE:,}" in hit.message
    assert f"{NATIVE:,} (read from the model catalog's Qwen3.5-397B-A17B)" in hit.message, hit.message
    assert hit.fix == f"lower `--max-model-len` to {NATIVE} (what ATOM (ROCm) serves the model at)"
    assert hit.line == RECIPE.count("\n")


def _capped(tmp_path: Path, text: str) -> list:
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    return [f for f in validate_files([path]).findings if f.rule == "serve.context-capped"]


def test_an_atom_cap_read_from_the_checkpoint_s_config_names_it(plan: Callable[[str], list[Job]],
                                                              tmp_path: Path) -> None:
    """A local checkpoint's config.json is where ATOM reads its positions: the cap is read there first, and the
    warning names the file (it said "its checkpoint's max_position_embeddings" whatever the number's source)."""
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text('{"text_config": {"max_position_embeddings": 32768}}', encoding="utf-8")
    text = _text("atom", "{--max-model-len: 40000}").replace("    args:", f"    model-path: {checkpoint}\n    args:")
    (hit,) = _capped(tmp_path, text)
    assert f"native 32,768 (read from text_config.max_position_embeddings in {checkpoint / 'config.json'})" \
        in hit.message, hit.message
    assert hit.fix == "lower `--max-model-len` to 32768 (what ATOM (ROCm) serves the model at)"
    (job,) = plan(text)
    assert launched_job(job).max_model_len == 32_768


ESTIMATED = 1_048_576
"""MiniMax-M3's native context in the model catalog, marked an estimate there ("exact length not in our notes")."""


@pytest.mark.parametrize(("written", "warned"), [(2_000_000, True), (ESTIMATED, False), (8192, False)])
def test_an_atom_cap_the_catalog_only_estimates_is_not_applied(plan: Callable[[str], list[Job]], tmp_path: Path,
                                                              written: int, warned: bool) -> None:
    """Where the only source of the checkpoint's positions is the catalog's estimate, job.json records the recipe's
    context (a guessed cut is no length that ran), and the warning says the length ATOM cuts to is unknown: the
    estimate had been applied as ATOM's cut and called its checkpoint's max_position_embeddings."""
    spec = find_model("MiniMaxAI/MiniMax-M3")
    assert spec is not None and spec.native_context == ESTIMATED and spec.is_estimate("native_context")
    text = (_text("atom", f"{{--max-model-len: {written}}}")
            .replace("Qwen/Qwen3.5-397B-A17B-FP8", "MiniMaxAI/MiniMax-M3").replace("qwen3.5", "minimaxm3"))
    (job,) = plan(text)
    assert launched_job(job).max_model_len == written
    hits = _capped(tmp_path, text)
    if not warned:
        assert not hits
        return
    (hit,) = hits
    assert not hit.is_error and f"over MiniMaxAI/MiniMax-M3's native {ESTIMATED:,} as the model catalog's MiniMax-M3 " \
        f"estimates it ({spec.estimates['native_context']})" in hit.message, hit.message
    assert "that length is unknown here, so job.json records the recipe's 2,000,000 tokens" in hit.message
    assert hit.fix is not None and "config.json" in hit.fix and "serve.model-path" in hit.fix


def test_vllm_and_sglang_contexts_are_not_cut_to_the_model_s(plan: Callable[[str], list[Job]]) -> None:
    """Only ATOM cuts its flag without a word: vLLM refuses a length over the model's at start-up unless told to
    allow it, and SGLang likewise; their launches record what the recipe set."""
    for engine, flag in (("vllm", "--max-model-len"), ("sglang", "--context-length")):
        (job,) = plan(_text(engine, f"{{{flag}: 300000}}"))
        assert launched_job(job).max_model_len == 300_000


@pytest.mark.parametrize(("value", "tokens"), [
    ("32k", 32_000), ("32K", 32_768), ("25.6k", 25_600), ("1m", 1_000_000), (" 8192 ", 8192), (8192, 8192),
    ("auto", "auto"), ("AUTO", "auto"), ("-1", "auto"), (-1, "auto"), ("8.5K", None), ("lots", None), (True, None),
])
def test_vllm_reads_its_context_as_its_parser_does(value: object, tokens: object) -> None:
    """vLLM's `--max-model-len` takes human-readable counts (lower-case suffix decimal, upper-case binary) and `auto`
    or -1 (fit the context to the KV memory profiled at start-up)."""
    from llmsweep.engines.vllm import max_model_len

    assert max_model_len(value) == tokens


@pytest.mark.parametrize(("value", "context"), [("32k", 32_000), ("4K", 4096), ("auto", None), ("-1", None)])
def test_a_vllm_context_in_its_own_notation_is_recorded_as_it_runs(plan: Callable[[str], list[Job]], tmp_path: Path,
                                                                  value: str, context: int | None) -> None:
    """`--max-model-len: 32k` was refused as no number of tokens, and `-1` (vLLM: fit to memory) refused as a context
    of -1 tokens below what the job needs; job.json records 32,000, or no length for a context vLLM fits at start-up
    (the simulator, standing in, then serves only what its KV pool holds)."""
    from llmsweep.sim.serve_args import engine_config_from_argv

    assert not _context_hits(tmp_path, "vllm", f"{{--max-model-len: '{value}'}}")
    (job,) = plan(_text("vllm", f"{{--max-model-len: '{value}'}}"))
    assert launched_job(job).max_model_len == context
    argv = engines.render(job).argv
    assert argv[argv.index("--max-model-len") + 1] == value
    sim_argv = engines.render(job, simulate=True).argv
    native = find_model("Qwen/Qwen3.5-397B-A17B-FP8").native_context  # type: ignore[union-attr]
    assert engine_config_from_argv(sim_argv).context_length == (context or native)


def test_the_hbm_fit_check_of_an_auto_context_asks_room_for_what_the_job_sends(tmp_path: Path) -> None:
    """vLLM fits an `auto` context to its memory, so no native-length request need fit — but one of the job's must:
    the check sizes KV at the job's own isl + osl + 256, as for a launch without a context flag."""
    text = _text("vllm", "{--max-model-len: auto}").replace("tp: 8", "tp: 2")
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    hits = [f for f in validate_files([path]).findings if f.rule == "resources.hbm-fit"]
    assert hits and all(f"({NEED} tokens" in h.message for h in hits), [h.message for h in hits]


@pytest.mark.parametrize(("engine", "args", "flag", "context"), [
    ("sglang", "{--context-length: 100}", "--context-length", 100),
    ("sglang", "{--max-model-len: 8192}", "--max-model-len", 8192),
    ("vllm", "{--max-model: 8192}", "--max-model", 8192),
    ("trtllm", "{--max-seq-len: 4096}", "--max_seq_len", 4096),  # trtllm-serve's click spells it with `_`
    ("vllm", "{}", "--max-model-len", NEED),
])
def test_the_job_as_launched_records_the_context_the_launch_runs_with(
        plan: Callable[[str], list[Job]], engine: str, args: str, flag: str, context: int) -> None:
    """job.json is written from `launched_job`: its max-model-len is the value on the command line, which carries
    one context flag (the recipe's replaces the derived one)."""
    (job,) = plan(_text(engine, args))
    assert launched_job(job).max_model_len == context
    argv = engines.render(job).argv
    adapter = engines.get_adapter(engine)
    flags = [a for a in argv if a.startswith("--") and adapter.canonical(a) == adapter.canonical(flag)]
    assert flags == [flag] and argv[argv.index(flag) + 1] == str(context)


def test_the_hbm_fit_check_asks_room_for_the_context_the_launch_runs_with(tmp_path: Path) -> None:
    """`resources.hbm-fit` sized one request's KV at the derived 576 tokens while the recipe's flag ran 131,072."""
    text = _text("sglang", "{--context-length: 131072}").replace("tp: 8", "tp: 2")
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    (hit,) = [f for f in validate_files([path]).findings if f.rule == "resources.hbm-fit"]
    assert "(131072 tokens)" in hit.message


@pytest.mark.parametrize(("engine", "args", "context"), [
    ("sglang", "{--context-length: 8192}", 8192), ("vllm", "{--max-model: 4096}", 4096),
    ("trtllm", "{--max-seq-len: 2048}", 2048), ("vllm", "{}", NEED),
])
def test_the_simulator_serves_the_context_the_jobs_engine_would_launch_with(
        plan: Callable[[str], list[Job]], engine: str, args: str, context: int) -> None:
    """Under --simulate the simulator refuses what the engine it stands in for would refuse: a request beyond the
    launched context (it used to take anything its KV pool held, ~100x more)."""
    from llmsweep.sim.engine import build_core
    from llmsweep.sim.serve_args import engine_config_from_argv

    (job,) = plan(_text(engine, args))
    argv = engines.render(job, simulate=True).argv
    assert argv[argv.index("--context-length") + 1] == str(context)
    core = build_core(engine_config_from_argv(argv))
    assert core.config.context_length == context < core.capacity_tokens
    assert core.refusal(context - 100, 100) is None
    refused = core.refusal(context - 100, 101)
    assert refused is not None and f"maximum context length is {context} tokens" in refused


@pytest.mark.parametrize(("args", "context"), [("{}", None), ("{--context-length: 65536}", 65536)])
def test_an_agentic_job_on_the_simulator_is_bounded_by_its_recipes_context_flag_only(
        plan: Callable[[str], list[Job]], tmp_path: Path, args: str, context: int | None) -> None:
    """Without a context flag only the simulator's KV pool bounds an agentic request (synthetic traces keep their
    full-scale shape); a recipe's flag is served, and `validate --simulate` warns when the traces reach past it."""
    from llmsweep.sim.serve_args import engine_config_from_argv

    text = _text("sglang", args).replace("""    fixed-seq-len:
    - isl: 256
      osl: 64
      search-space:
      - { tp: 8, conc-list: [4] }""", """    agentic-coding:
    - search-space:
      - { tp: 8, kv-offloading: none, conc-list: [4] }""").replace("runner: mi300x", "runner: cluster:mi300x-amds")
    text += "  workload:\n    traces: { synthetic: { max-isl: 100000 } }\n"
    (job,) = plan(text)
    argv = engines.render(job, simulate=True).argv
    assert engine_config_from_argv(argv).context_length == context
    assert ("--context-length" in argv) == (context is not None)
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    hits = [f for f in validate_files([path], simulate=True).findings if f.rule == "serve.agentic-context"]
    assert len(hits) == (context is not None)
    if hits:
        assert "over the 65,536 tokens of the recipe's `--context-length: 65536`" in hits[0].message


@pytest.mark.parametrize("flag", ["--context-length", "--max-model-len", "--max_seq_len"])
def test_a_sim_recipes_context_flag_in_any_engines_spelling_is_served(plan: Callable[[str], list[Job]],
                                                                      tmp_path: Path, flag: str) -> None:
    """A `sim` recipe's `--max-model-len: 4096` was neither served nor warned about as not modelled."""
    text = _text("sglang", f"{{{flag}: 4096}}").replace("engine: { name: sglang }", "engine: { name: sim }")
    (job,) = plan(text)
    argv = engines.render(job).argv
    assert argv[argv.index("--context-length") + 1] == "4096"


@pytest.mark.parametrize(("image", "refused"), [("vllm/vllm-openai:v0.11.0", True), ("vllm/vllm-openai:v0.12.0", False),
                                               ("vllm/vllm-openai:v0.26.0", False)])
def test_an_auto_context_is_refused_where_vllms_parser_does_not_take_it(tmp_path: Path, image: str,
                                                                        refused: bool) -> None:
    """vLLM fits `auto`/-1 to its memory from vllm#29431 (0.12.0, inferred); an older parser refuses `auto` at
    start-up and reads -1 as a length, after the job waited for its node."""
    path = tmp_path / "r.yaml"
    path.write_text(_text("vllm", "{--max-model-len: auto}").replace(IMAGES["vllm"], image), encoding="utf-8")
    hits = [f for f in validate_files([path]).findings if f.rule == "serve.context-conflict"]
    assert len(hits) == refused
    if hits:
        assert "vLLM 0.11.0 does not do" in hits[0].message and "from 0.12.0" in hits[0].message
        assert hits[0].fix is not None and "vLLM 0.12.0 or later" in hits[0].fix
