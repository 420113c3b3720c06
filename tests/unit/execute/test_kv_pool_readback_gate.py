"""A real engine's launch that pins its KV pool is read back: vLLM's `--num-gpu-blocks-override N` replaces its
profiled block count (N blocks of its block size on each engine), SGLang's `--max-total-tokens N` caps each DP rank's
pool (`min(profiled, N)`). The pool is the one the engines reported over /metrics (`server_metrics.kv_cache`); a
disagreement makes the point invalid, a pool the engines do not report leaves it at most smoke, and a launch that
pins nothing, or a simulated point, gets no check. The vLLM figures are the committed vLLM 0.26.0 H100 scrape's:
`num_gpu_blocks` 192418 of 16 tokens, `kv_cache_size_tokens` 3078688."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmsweep.execute.readback import ReadbackSettings, apply_readback, kv_pool_check
from llmsweep.metrics.model import ReadbackCheck, Summary
from llmsweep.metrics.server import summarise_server
from llmsweep.plan import Job

LLAMA = Path(__file__).resolve().parents[3] / "examples" / "results" / "h100-vllm-0.26.0" / "llama" / "jobs"
(FOLDER,) = sorted(LLAMA.glob("llama-1b_1024_256_*_conc4_*"))


def _job(pins: dict[str, Any] | None = None, engine: str = "vllm") -> Job:
    """The committed job with `pins` added to its launch (`None` removes a flag, as an override's null does)."""
    job = Job.model_validate(json.loads((FOLDER / "job.json").read_text()))
    assert job.serve is not None
    args = {**job.serve.args, **(pins or {})}
    return job.model_copy(update={"engine": engine, "serve": job.serve.model_copy(update={"args": args})})


def _summary(scrapes: Path | list[dict[str, Any]], *, verdict: str = "valid", source: str = "measured") -> Summary:
    return Summary.model_validate({
        "source": source,
        "validity": {"verdict": verdict, "reasons": []},
        "server_metrics": summarise_server(scrapes, start=None, end=None)})


def _check(job: Job, summary: Summary) -> ReadbackCheck:
    check = kv_pool_check(job, summary)
    assert check is not None
    return check


REAL = FOLDER / "server_metrics.jsonl"


def test_the_committed_vllm_pool_matches_an_override_of_its_own_block_count() -> None:
    judged = apply_readback(_job({"--num-gpu-blocks-override": 192418}), _summary(REAL), ReadbackSettings())
    assert judged.validity.verdict == "valid"
    assert judged.readback is not None and judged.readback.ok
    (check,) = judged.readback.checks
    assert (check.check, check.ok, check.pinned, check.realised) == ("kv_pool", True, 3_078_688, 3_078_688)
    assert "192418 blocks of 16 tokens" in (check.reason or "")


def test_a_vllm_pool_the_override_does_not_explain_is_invalid_and_says_so() -> None:
    """An engine that ignored the override ran its profiled pool: 3,078,688 tokens, not 16384 x 16."""
    judged = apply_readback(_job({"--num-gpu-blocks-override": 16384}), _summary(REAL), ReadbackSettings())
    assert judged.validity.verdict == "invalid"
    (reason,) = judged.validity.reasons
    assert "--num-gpu-blocks-override 16384" in reason and "262,144" in reason and "3,078,688" in reason


def test_the_pin_is_read_as_vllms_parser_reads_it() -> None:
    """`_` for `-`, `--flag=value`, a unique prefix: the same flag to vLLM, so the same check."""
    for written in ({"--num_gpu_blocks_override": 16384}, {"--num-gpu-blocks-override=16384": None},
                    {"--num-gpu-blocks-over": "16384"}):
        assert _check(_job(written), _summary(REAL)).ok is False, written
    assert _check(_job({"--block-size": 32, "--num-gpu-blocks-override": 96209}), _summary(REAL)).ok is True


def test_a_whole_multiple_of_the_pin_is_inconclusive_not_passed() -> None:
    """Twice the pin is what a sliding-window model's two KV cache groups, or decode context parallelism, make vLLM
    report: no pass, no failure either."""
    judged = apply_readback(_job({"--num-gpu-blocks-override": 96209}), _summary(REAL), ReadbackSettings())
    assert judged.validity.verdict == "smoke"
    assert judged.validity.reasons[0].startswith("read-back inconclusive: ") and "2 times" in judged.validity.reasons[0]


def test_a_pool_the_engines_do_not_report_is_inconclusive() -> None:
    lines = [json.loads(line) for line in REAL.read_text().splitlines()]
    for scrape in lines:
        scrape["samples"] = [s for s in scrape["samples"] if s[0] != "vllm:cache_config_info"]
    judged = apply_readback(_job({"--num-gpu-blocks-override": 192418}), _summary(lines), ReadbackSettings())
    assert judged.validity.verdict == "smoke"
    assert judged.readback is not None and judged.readback.checks[0].ok is None
    assert "report no KV pool" in judged.validity.reasons[0] and "--num-gpu-blocks-override 192418" in \
        judged.validity.reasons[0]


@pytest.mark.parametrize("pins", [{}, {"--num-gpu-blocks-override": None}, {"--num-gpu-blocks-override": False}])
def test_a_launch_that_pins_no_pool_gets_no_check(pins: dict[str, Any]) -> None:
    judged = apply_readback(_job(pins), _summary(REAL), ReadbackSettings())
    assert judged.readback is not None and judged.readback.checks == []
    assert judged.validity.verdict == "valid"


def test_a_simulated_point_gets_no_check() -> None:
    """The simulator's pool is the one it sizes from the same pin."""
    summary = _summary(REAL, source="simulated")
    assert kv_pool_check(_job({"--num-gpu-blocks-override": 16384}), summary) is None


def _sglang(*per_rank: float) -> list[dict[str, Any]]:
    """One scrape of SGLang's pool gauge: TP 2 ranks repeating each DP rank's pool."""
    return [{"t": 1.0, "samples": [
        ["sglang:max_total_num_tokens", {"model_name": "m", "tp_rank": str(tp), "dp_rank": str(dp)}, pool]
        for dp, pool in enumerate(per_rank) for tp in range(2)]}]


def test_sglang_takes_at_most_its_cap_on_each_dp_rank() -> None:
    job = _job({"--max-total-tokens": 300_000}, "sglang")
    capped = _check(job, _summary(_sglang(300_000, 300_000)))
    assert capped.ok is True and capped.realised == 300_000
    profiled_less = _check(job, _summary(_sglang(250_000, 250_000)))  # min(profiled, cap): the profiled pool
    assert profiled_less.ok is True
    over = apply_readback(job, _summary(_sglang(400_000, 400_000)), ReadbackSettings())
    assert over.validity.verdict == "invalid"
    assert "--max-total-tokens 300000" in over.validity.reasons[0] and "800,000" in over.validity.reasons[0]
    # SGLang's parser takes the pin under its own spelling too
    assert _check(_job({"--max_total_tokens": 300_000}, "sglang"), _summary(_sglang(400_000))).ok is False


def test_a_hybrid_models_pool_is_inconclusive_not_failed() -> None:
    """The committed Qwen3-Next (vLLM 0.26.0, H200): 35187 blocks of 560 tokens (sized for the linear-attention
    state) reported as 15,171,152 tokens, a pool the override's count of 16-token blocks does not give: no verdict
    from the tokens, rather than an invalid point that ran as pinned."""
    (folder,) = sorted((LLAMA.parents[2] / "h200-vllm-0.26.0" / "qwen3next-calib" / "jobs").glob("*_conc4_*"))
    job = Job.model_validate(json.loads((folder / "job.json").read_text()))
    assert job.serve is not None
    job.serve.args["--num-gpu-blocks-override"] = 35187
    check = _check(job, _summary(folder / "server_metrics.jsonl"))
    assert check.ok is None and check.realised == 15_171_152 and "linear-attention" in (check.reason or "")
