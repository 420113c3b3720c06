"""An SGLang job the simulator stands in for runs at SGLang's own running-request cap when the recipe pins none.

The simulator served every SGLang job at its own 256. SGLang sizes its request pool from its KV pool,
`min(max(int(max_total_num_tokens / context_len * 512), 2048), 4096)`, and its scheduler runs at most
`max_total_num_tokens // 2` of them (`ModelRunnerKVCacheMixin`, `KVCacheConfigurator.resolve_max_num_reqs` in later
trees); with speculative decoding `ServerArgs` sets 48 where `--max-running-requests` is unset. So an unpinned
fixed-length SGLang point above 256 queued requests SGLang would have run, and an MTP point above 48 ran requests
SGLang would have queued. The launch now carries SGLang's value, computed from the KV pool the simulator sizes for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.catalog.hardware import get_hardware
from llmsweep.catalog.sources import clear_caches
from llmsweep.execute.virtual import engine_config
from llmsweep.plan import Job, jobs_from_files
from llmsweep.sim.engine import sglang_running_cap

RECIPE = """cap:
  image: lmsysorg/sglang:v0.5.12
  model: MODEL
  model-prefix: PREFIX
  runner: h200
  precision: bf16
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 1024
      osl: 1024
      search-space:
      - { tp: 1, conc-list: [512]SPEC }
SERVE"""
LLAMA_8B = ("meta-llama/Llama-3.1-8B-Instruct", "llama3.1-8b")
LLAMA_1B = ("llmsweep/llama-1b", "llama-1b")


def _job(tmp_path: Path, model: tuple[str, str] = LLAMA_8B, *, args: str = "", spec: str = "",
         serve_spec: str = "") -> Job:
    """An SGLang job on one H200 at conc 512; `spec`: the search-space entry's method (InferenceX's `mtp`);
    `serve_spec`: a `serve.spec-decoding` mapping."""
    serve = "  serve:\n" if args or serve_spec else ""
    serve += f"    args: {{ {args} }}\n" if args else ""
    serve += f"    spec-decoding: {{ {serve_spec} }}\n" if serve_spec else ""
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE.replace("MODEL", model[0]).replace("PREFIX", model[1]).replace("SERVE", serve)
                    .replace("SPEC", f", spec-decoding: {spec}" if spec else ""), encoding="utf-8")
    (job,) = jobs_from_files([path])
    return job


def _cap(argv: Sequence[str]) -> int | None:
    return int(argv[list(argv).index("--max-running-requests") + 1]) if "--max-running-requests" in argv else None


def _kv_pool_by_hand(mem_fraction: float) -> int:
    """Llama-3.1-8B at bf16 on one H200, from the catalogs by hand: per GPU, HBM x fraction - 1 GiB reserve - 8.03B
    x 2 bytes of weights, over 32 layers x (K, V) x 8 KV heads x 128 x 2 bytes per token."""
    hbm = get_hardware("h200").hbm_gb * 1e9
    return int((hbm * mem_fraction - 2**30 - 8.03e9 * 2) // (32 * 2 * 8 * 128 * 2))


@pytest.mark.parametrize(("tokens", "context", "cap"), [
    (1_000_000, 131_072, 3906),  # the pool between its bounds: int(7.63 x 512)
    (100_000, 9_472, 4096),  # a short context: the 4096 ceiling
    (300_000, 131_072, 2048),  # a long context on a small pool: the 2048 floor
    (3_000, 9_472, 1500),  # a pool smaller than 2 x the floor: T // 2
])
def test_sglang_s_rule(tokens: int, context: int, cap: int) -> None:
    assert sglang_running_cap(tokens, context) == cap


def test_an_unpinned_sglang_job_runs_at_the_pool_its_kv_cache_sizes(tmp_path: Path) -> None:
    """Llama-3.1-8B on one H200 at SGLang's 131072-token context: a KV pool of ~881k tokens sizes a pool of 3443
    requests (computed by hand from the catalogs' figures); the launch, the engine config and the note say so."""
    job = _job(tmp_path, args="--context-length: 131072")
    spec = engines.render(job, simulate=True)
    tokens = _kv_pool_by_hand(0.88)
    assert _cap(spec.argv) == int(tokens / 131072 * 512) == 3443, spec.argv
    config = engine_config(spec)
    assert config.max_running_requests == 3443  # what the core runs and provenance's engine_config says
    assert config.sim_config().kv_capacity_tokens == tokens  # the pool the cap was sized from is the one served
    (note,) = [n for n in spec.notes if n.startswith("max running requests")]
    assert "SGLang's default when --max-running-requests is unset" in note and f"KV pool of {tokens}" in note, note
    assert "ModelRunnerKVCacheMixin" in note, note


def test_a_fixed_length_sglang_job_takes_the_4096_ceiling(tmp_path: Path) -> None:
    """A fixed-length job launches with isl + osl + 256 tokens of context: any pool of 8 or more such contexts
    reaches SGLang's ceiling (InferenceX's 8k1k SGLang points on MI3xx all run at 4096, where the simulator ran 256)."""
    for model in (LLAMA_8B, LLAMA_1B):
        assert _cap(engines.render(_job(tmp_path, model), simulate=True).argv) == 4096


def test_the_recipe_s_memory_fraction_sizes_the_pool_and_half_of_it_caps(tmp_path: Path) -> None:
    """`--mem-fraction-static` the recipe pins is the fraction the pool is sized with; a pool of under 4096 tokens
    runs at most half of them at once."""
    spec = engines.render(_job(tmp_path, args="--mem-fraction-static: 0.1165"), simulate=True)
    tokens = _kv_pool_by_hand(0.1165)
    assert tokens < 4096 and _cap(spec.argv) == tokens // 2, (tokens, spec.argv)


@pytest.mark.parametrize(("spec", "serve_spec", "method"), [
    ("mtp", "", "mtp"),  # an InferenceX entry: the method only, SGLang's NEXTN/EAGLE
    ("mtp", "method: ngram, num-steps: 3", "ngram"),  # NGRAM sets the same 48
])
def test_a_speculative_sglang_job_runs_at_48(tmp_path: Path, spec: str, serve_spec: str, method: str) -> None:
    """SGLang sets 48 for every speculative algorithm when `--max-running-requests` is unset."""
    rendered = engines.render(_job(tmp_path, LLAMA_1B, spec=spec, serve_spec=serve_spec), simulate=True)
    assert _cap(rendered.argv) == 48, rendered.argv
    assert f"--spec-method {method}" in " ".join(rendered.argv)
    assert engine_config(rendered).max_running_requests == 48
    (note,) = [n for n in rendered.notes if n.startswith("max running requests")]
    assert "_handle_speculative_decoding" in note, note


@pytest.mark.parametrize("spec", ["", "mtp"])
def test_a_pinned_cap_wins_over_sglang_s_default(tmp_path: Path, spec: str) -> None:
    """A pin of the simulator's own 256 stays 256: unset and 256 are not the same launch."""
    for value in (256, 300):
        rendered = engines.render(_job(tmp_path, LLAMA_1B, args=f"--max-running-requests: {value}", spec=spec),
                                  simulate=True)
        assert _cap(rendered.argv) == value
        assert not [n for n in rendered.notes if n.startswith("max running requests")]


def test_a_model_the_simulator_cannot_size_keeps_the_simulator_s_256(tmp_path: Path) -> None:
    """Where the simulator has no figures for the model the launch fails on its own later; the render does not."""
    job = _job(tmp_path, LLAMA_1B).model_copy(update={"model": "no-such-org/no-such-model"})
    assert _cap(engines.render(job, simulate=True).argv) is None


DISAGG = """k:
  image: lmsysorg/sglang:v0.5.16-rocm720-mi35x
  model: deepseek-ai/DeepSeek-R1-0528
  model-prefix: dsr1
  runner: mi355x-disagg
  precision: fp8
  framework: sglang-disagg
  multinode: true
  disagg: true
  kv-p2p-transfer: mori
  scenarios:
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - spec-decoding: SPEC
        conc-list: [1024]
        prefill: {num-worker: 1, tp: 8, ep: 1, dp-attn: false}
        decode: {num-worker: 1, tp: 8, ep: 1, dp-attn: false}
"""


@pytest.mark.parametrize(("spec", "cap"), [("none", 4096), ("mtp", 48)])
def test_each_worker_of_a_disaggregated_sglang_job_takes_sglang_s_cap(tmp_path: Path, spec: str, cap: int) -> None:
    """Prefill and decode workers are SGLang servers too: each sizes its own cap from its own pool (an 8k1k context
    on 8 MI355X: the 4096 ceiling), or takes 48 with MTP."""
    path = tmp_path / "d.yaml"
    path.write_text(DISAGG.replace("SPEC", spec), encoding="utf-8")
    (job,) = jobs_from_files([path])
    roles = engines.render_topology(job, simulate=True).roles
    caps = {role.kind: _cap(role.workers[0].spec.argv) for role in roles if role.kind != "router"}
    assert caps == {"prefill": cap, "decode": cap}, caps


SGLANG_WITH_A_FRACTION = """engines:
  sglang:
    display_name: SGLang
    default_port: 30000
    health_path: /health
    metrics_path: /metrics
    ready_markers: ["The server is fired up and ready to roll!"]
    memory_fraction_default:
      flag: --mem-fraction-static
      rules: [{value: 0.7}]
      source: a test catalog
    source: a test catalog
"""


def test_sglang_s_cap_is_sized_from_the_pool_at_the_engine_s_own_fraction(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's own memory fraction is written into the launch before SGLang's cap is computed from the pool:
    with a catalog that gives SGLang 0.7, the cap is the one a pool at 0.7 sizes (2634), not at the simulator's 0.88."""
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "engines.yaml").write_text(SGLANG_WITH_A_FRACTION, encoding="utf-8")
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(catalog))
    clear_caches()
    try:
        spec = engines.render(_job(tmp_path, args="--context-length: 131072"), simulate=True)
    finally:
        monkeypatch.delenv("LLMSWEEP_CATALOG_DIR")
        clear_caches()
    tokens = _kv_pool_by_hand(0.7)
    assert _cap(spec.argv) == int(tokens / 131072 * 512) == 2634, spec.argv
    assert engine_config(spec).sim_config().kv_capacity_tokens == tokens
