"""The GPU KV pool each engine reported, read back from its /metrics: vLLM's `cache_config_info` labels, SGLang's
`max_total_num_tokens` gauge, one figure per engine (ranks repeat it, DP ranks and disaggregated workers add up), and
the simulator's own pool reported the same way; `sim calibrate` replays a measured point at that pool."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.metrics.server import summarise_server

REPO = Path(__file__).resolve().parents[3]
H100_LLAMA = REPO / "examples" / "results" / "h100-vllm-0.26.0" / "llama"
H200_QWEN = REPO / "examples" / "results" / "h200-vllm-0.26.0" / "qwen3next-calib"


def _pool(scrapes: list[dict[str, object]]) -> float | None:
    return summarise_server(scrapes, start=0.0, end=10.0)["kv_cache"]["pool_tokens"]


def test_real_vllm_scrapes_say_the_pool_vllm_logged() -> None:
    """vLLM 0.26.0 on an H100 (Llama 1B, memory fraction 0.85) and on an H200 (a hybrid Qwen3-Next): the pool is the
    `kv_cache_size_tokens` label, what vLLM logs as its "GPU KV cache size" (for the hybrid model not num_gpu_blocks x
    block_size, which counts the linear-attention layers' pages too)."""
    dense = sorted(H100_LLAMA.glob("jobs/*_conc4_*/server_metrics.jsonl"))[0]
    hybrid = sorted(H200_QWEN.glob("jobs/*/server_metrics.jsonl"))[0]
    assert summarise_server(dense, start=None, end=None)["kv_cache"]["pool_tokens"] in (3_078_688, 5_534_208)
    out = summarise_server(hybrid, start=None, end=None)["kv_cache"]
    assert out["pool_tokens"] == 15_171_152


def _info(engine: str, blocks: str, size: str = "16", tokens: str | None = None) -> list[object]:
    labels = {"engine": engine, "block_size": size, "num_gpu_blocks": blocks}
    if tokens is not None:
        labels["kv_cache_size_tokens"] = tokens
    return ["vllm:cache_config_info", labels, 1.0]


def test_vllm_engines_add_up_and_an_unsized_pool_is_none() -> None:
    one = {"t": 1.0, "samples": [_info("0", "1000")]}
    assert _pool([one]) == 16_000
    # data parallel: each engine's own `kv_cache_size_tokens` adds up
    two = [_info("0", "2000", tokens="16000"), _info("1", "2000", tokens="16000")]
    assert _pool([{"t": 1.0, "samples": two}]) == 32_000
    # an older release says only num_gpu_blocks, which its front end already summed over the DP engines before each
    # engine's series repeats it: taken once
    assert _pool([{"t": 1.0, "samples": [_info("0", "2000"), _info("1", "2000")]}]) == 32_000
    # the release's own token figure wins over blocks x block size
    assert _pool([{"t": 1.0, "samples": [_info("0", "1000", tokens="12345")]}]) == 12_345
    # before profiling vLLM says None
    assert _pool([{"t": 1.0, "samples": [_info("0", "None")]}]) is None
    # a hybrid model's blocks count its linear-attention pages too: without the token figure, no pool is read
    hybrid = _info("0", "35187", "560")
    assert isinstance(hybrid[1], dict)
    hybrid[1]["mamba_block_size"] = "16384"
    assert _pool([{"t": 1.0, "samples": [hybrid]}]) is None


def test_sglang_ranks_repeat_their_engines_pool_and_dp_ranks_add_up() -> None:
    def row(tp: int, dp: int | None, value: float) -> list[object]:
        labels = {"model_name": "m", "engine_type": "unified", "tp_rank": str(tp), "pp_rank": "0",
                  "moe_ep_rank": str(tp)}
        if dp is not None:
            labels["dp_rank"] = str(dp)
        return ["sglang:max_total_num_tokens", labels, value]

    # every scheduler of a TP 8 engine exports the same pool (--enable-metrics-for-all-schedulers): one pool
    tp8 = {"t": 1.0, "samples": [row(r, None, 500_000.0) for r in range(8)]}
    assert _pool([tp8]) == 500_000
    # two DP ranks of TP 4: two pools
    dp2 = {"t": 1.0, "samples": [row(r, r // 4, 250_000.0) for r in range(8)]}
    assert _pool([dp2]) == 500_000
    # a disaggregated deployment's workers (the federated /metrics' role label): each its own pool
    roles = {"t": 1.0, "samples": [["sglang:max_total_num_tokens", {"role": "prefill", "worker": "0"}, 100.0],
                                   ["sglang:max_total_num_tokens", {"role": "decode", "worker": "0"}, 300.0]]}
    assert _pool([roles]) == 400


@pytest.mark.parametrize("framework", ["sglang", "vllm"])
def test_the_simulator_reports_its_own_pool_the_way_the_engine_does(framework: str, tmp_path: Path) -> None:
    from llmsweep import engines
    from llmsweep.plan import jobs_from_files
    from llmsweep.plan.point import points_of
    from llmsweep.sim.predict import predict_point
    from llmsweep.sim.serve_args import engine_config_from_argv

    recipe = tmp_path / "fixed.yaml"
    text = (REPO / "tests" / "data" / "recipes" / "run" / "fixed-sim.yaml").read_text()
    recipe.write_text(text.replace("framework: sglang", f"framework: {framework}"))
    job = sorted(jobs_from_files([recipe]), key=lambda j: j.concs[0])[0]
    config = engine_config_from_argv(engines.render(job, simulate=True).argv)
    assert config.engine_style == framework
    predicted = predict_point(points_of(job)[0], config)
    assert predicted.summary is not None
    pool = predicted.summary.server_metrics.kv_cache
    assert pool is not None and pool.pool_tokens == config.sim_config().pool_tokens > 0


def test_calibrate_replays_a_measured_point_at_the_pool_its_engine_reported(tmp_path: Path) -> None:
    """The committed H200 run of the hybrid class: vLLM reported 15.2M tokens where the simulator sizes ~30M for the
    launch. The replay runs at the engine's pool and the table says so; a summary without the figure (written
    before it was read back) replays at the simulator's own."""
    from llmsweep.cli.sim import _config_for_job
    from llmsweep.cli.sim import calibrate as calibrate_cmd
    from llmsweep.sim.calibrate import measured_point

    (job,) = sorted(H200_QWEN.glob("jobs/qwen3.5_*_conc1_*"))[:1]
    copy = tmp_path / "run" / "jobs" / job.name
    shutil.copytree(job, copy)
    shutil.copy(H200_QWEN / "run.json", tmp_path / "run" / "run.json")
    before = measured_point(copy, _config_for_job)
    assert before.kv_pool is None and before.config.kv_capacity_tokens is None
    own = before.config.kv_pool_tokens()

    summary = json.loads((copy / "summary.json").read_text())
    reported = summarise_server(copy / "server_metrics.jsonl", start=None, end=None)["kv_cache"]["pool_tokens"]
    summary["server_metrics"]["kv_cache"]["pool_tokens"] = reported
    (copy / "summary.json").write_text(json.dumps(summary))
    point = measured_point(copy, _config_for_job)
    assert point.kv_pool is not None and point.kv_pool.reported == int(reported)
    assert point.kv_pool.simulated == own and point.kv_pool.ratio == pytest.approx(own / reported)
    assert point.config.kv_capacity_tokens == int(reported)
    assert point.config.sim_config().pool_tokens <= reported < own
    assert "kv_pool_tokens" not in point.provenance  # said per point (`kv_pool`), not as the fit's provenance

    out = CliRunner().invoke(calibrate_cmd, [str(tmp_path / "run"), "--factors", "step_s", "--max-iter", "1"])
    assert out.exit_code == 0, out.output
    assert (f"replayed at the engine's KV pool, {int(reported):,} tokens as its /metrics said (the simulator sizes "
            f"{own:,} for its launch") in out.stdout
    as_json = CliRunner().invoke(calibrate_cmd, [str(tmp_path / "run"), "--factors", "step_s", "--max-iter", "1",
                                                 "--json"])
    assert as_json.exit_code == 0, as_json.output
    (fit,) = json.loads(as_json.stdout)["calibrations"]
    assert fit["points"][0]["kv_pool"] == {"reported": int(reported), "simulated": own, "unused": None}


def test_a_pool_said_by_fewer_engines_than_the_jobs_dp_ranks_is_not_replayed(tmp_path: Path) -> None:
    """A pool one engine said where the job ran several DP ranks may be one rank's (an SGLang whose DP-attention
    ranks carry no `dp_rank` label): the replay keeps the simulator's own and the table says why."""
    from llmsweep.cli.sim import _config_for_job
    from llmsweep.sim.calibrate import PointComparison, measured_point, pool_lines

    (job,) = sorted(H200_QWEN.glob("jobs/qwen3.5_*_conc1_*"))[:1]
    copy = tmp_path / "run" / "jobs" / job.name
    shutil.copytree(job, copy)
    summary = json.loads((copy / "summary.json").read_text())
    summary["server_metrics"]["kv_cache"].update(pool_tokens=15_171_152, pool_engines=1)
    (copy / "summary.json").write_text(json.dumps(summary))

    def two_ranks(doc: dict[str, object]) -> object:  # the same launch, as if it had run two DP-attention ranks
        return _config_for_job(doc).model_copy(update={"tp": 2, "dp_attention": 2})  # type: ignore[attr-defined]

    point = measured_point(copy, two_ranks)
    assert point.kv_pool is not None and point.kv_pool.unused is not None
    assert "said by 1 engine where the job ran 2 DP ranks" in point.kv_pool.unused
    assert point.config.kv_capacity_tokens is None  # the simulator's own pool
    comparison = PointComparison(label=point.label, concurrency=1, scenario=point.scenario, measured={}, before={},
                                 after={}, weights={}, excess_hit_rate=0.0, kv_pool=point.kv_pool)
    (line,) = pool_lines([comparison])
    assert line.startswith("not replayed at the KV pool its /metrics said, 15,171,152 tokens: said by 1 engine")
    # the same summary for the job as it ran (one rank): replayed at the engine's pool
    assert measured_point(copy, _config_for_job).config.kv_capacity_tokens == 15_171_152
