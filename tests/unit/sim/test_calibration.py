"""Run-level calibration: the fit recovers known factors, stored calibrations apply only to their key, a saved user
calibration is picked up, and the fit really improves the simulator against the measured H200 vLLM run."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.cli.sim import _config_for_job
from llmsweep.cli.sim import calibrate as calibrate_cmd
from llmsweep.cli.sim import predict as predict_cmd
from llmsweep.errors import ConfigError, DatasetError, ResultError
from llmsweep.sim.calibrate import (
    FIT_START,
    METRICS,
    MeasuredPoint,
    _replays,
    default_factors,
    fit_run,
    measured_point,
    predict_metrics,
)
from llmsweep.sim.calibration import (
    UNCALIBRATED,
    CalibrationEntry,
    CalibrationProvenance,
    calibration_key,
    entry_id,
    find_calibration,
    save_calibration,
)
from llmsweep.sim.engine import EngineConfig, build_core
from llmsweep.sim.perf import Batch
from llmsweep.spec.workload import ResolvedWorkload
from llmsweep.workload.agentic import AgenticWorkload, replay_corpus_digest

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

REPO = Path(__file__).resolve().parents[3]
H200_RUN = REPO / "examples" / "results" / "h200-vllm-0.26.0"



def _fixed_point(config: EngineConfig, conc: int, truth: dict[str, float]) -> MeasuredPoint:
    """A 'measured' fixed-length point whose numbers the simulator produced with the factors in `truth`."""
    job = {"conc": conc, "gpus": 1, "isl": 1024, "osl": 128,
           "workload": {"scenario": "fixed-seq-len", "tokenizer": "builtin", "served-model-name": "m",
                        "use-chat-template": False, "seed": 3, "isl": 1024, "osl": 128,
                        "num-prompts": 6 * conc, "num-warmups": conc, "range-ratio": 0.8}}
    point = MeasuredPoint(path=Path("."), job=job, config=config, concurrency=conc, scenario="fixed-seq-len",
                          measured={}, weights=dict.fromkeys(METRICS, 1.0),
                          excess_hit_rate=0.0, provenance={"run_id": "synthetic"})
    measured = predict_metrics(_replays([point])[0], truth)
    return MeasuredPoint(**{**point.__dict__, "measured": measured})


def test_run_fit_recovers_the_factors_that_produced_the_measurements(user_catalog: Path) -> None:
    truth = {"mem": 0.5, "compute": 0.3, "step_s": 2.5e-3, "frontend_s": 0.03}
    config = EngineConfig(model="llama-3.1-8b", hardware="h200", engine_style="vllm")
    points = [_fixed_point(config, conc, truth) for conc in (1, 4, 16, 64)]
    # converged by the 7th iteration (measured: error 49.6 % -> 0.16 %, every factor within 4.3 %); an 8th only tries
    # steps that do not help (ten replays of all four points)
    result = fit_run(points, factors=tuple(truth), max_iter=7, fit_requests_per_lane=None)
    assert result.error_before > 0.15  # the defaults really are wrong for these "measurements"
    assert result.error_after < 0.02
    for name in ("compute", "frontend_s"):  # prefill's slope and TTFT's intercept: each set by one factor
        assert getattr(result.efficiency, name) == pytest.approx(truth[name], rel=0.1), name
    # `mem` and `step_s` trade against each other: a small dense model's decode step is its weight read (mem) plus
    # the fixed cost (step_s), the KV read too small to tell them apart (measured: mem +8 %, step_s +19 %, every
    # point's metrics within 0.2 %). What the points pin is the step they add up to, at each measured batch.
    fitted, true = (build_core(config.model_copy(update={"efficiency": e})).timer
                    for e in (dataclasses.asdict(result.efficiency), {**dataclasses.asdict(result.base), **truth}))
    for conc in (1, 4, 16, 64):
        batch = Batch(decode_seqs=conc, decode_tokens=conc, decode_ctx=conc * 1100)
        assert fitted.step_time(batch) == pytest.approx(true.step_time(batch), rel=0.03), conc
    assert result.key == ("vllm", "h200", "dense-small", "bf16", 1, "bf16", 1, 1)


def test_the_front_ends_latency_per_request_in_flight_is_fitted_from_points_at_several_concurrencies(
        user_catalog: Path) -> None:
    """`frontend_per_request_s` is off by default (0, which the log-scale search cannot start from: it starts at
    FIT_START) and fitted by default once the points span concurrencies; the *before* is still the defaults. (Its
    value is not recovered the way `frontend_s` is: it moves requests that arrive together apart, and the closed
    loop's TTFT median answers that in steps, docs/simulator.md "Fidelity".)"""
    truth = {"frontend_s": 0.02, "frontend_per_request_s": 6e-4}
    config = EngineConfig(model="llama-3.1-8b", hardware="h200", engine_style="vllm")
    points = [_fixed_point(config, conc, truth) for conc in (1, 16, 64)]
    assert default_factors(points)[-1] == "frontend_per_request_s"
    assert "frontend_per_request_s" not in default_factors(points[1:2])  # one concurrency: it is frontend_s again
    result = fit_run(points, factors=tuple(truth), max_iter=2, fit_requests_per_lane=None)
    unloaded = fit_run(points, factors=("frontend_s",), max_iter=0, fit_requests_per_lane=None)
    assert result.error_before == pytest.approx(unloaded.error_before)  # the defaults: no load term
    assert result.error_after < 0.6 * result.error_before
    assert result.efficiency.frontend_per_request_s != FIT_START["frontend_per_request_s"]  # fitted, not kept
    assert set(result.overrides()) == set(truth)


def test_a_fit_also_starts_from_the_stored_calibration_and_keeps_the_better_end(user_catalog: Path) -> None:
    """From the defaults a few iterations can stop well short of factors already known (the H200 Llama run refitted
    to 15.6 % where its stored factors still gave 11.4 %): the search also starts from the stored calibration."""
    truth = {"mem": 0.5, "compute": 0.3, "step_s": 2.5e-3, "frontend_s": 0.03}
    config = EngineConfig(model="llama-3.1-8b", hardware="h200", engine_style="vllm")
    points = [_fixed_point(config, conc, truth) for conc in (1, 16)]
    cold = fit_run(points, factors=tuple(truth), max_iter=1, fit_requests_per_lane=None)
    known = config.efficiency_factors().with_(**{k: v * 1.02 for k, v in truth.items()})
    warm = fit_run(points, factors=tuple(truth), max_iter=1, fit_requests_per_lane=None, start=known)
    assert cold.started_from == "the defaults" and warm.started_from == "the stored calibration"
    assert warm.error_after < 0.01 < cold.error_after  # measured: 0.02 % against 2.5 %
    assert warm.error_before == pytest.approx(cold.error_before)  # "before" is the defaults either way
    assert warm.base == cold.base


def test_stored_calibration_applies_only_to_its_key(user_catalog: Path) -> None:
    calibrated = EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm")
    found = calibrated.calibration()
    assert found is not None and found[0] == "vllm-h200-dense-tiny"
    assert calibrated.calibration_label().startswith("calibrated: vllm-h200-dense-tiny (vllm 0.26.0, NVIDIA H200")
    assert calibrated.efficiency_factors().compute == pytest.approx(found[1].efficiency["compute"])
    # explicit overrides still win over the stored factors
    assert EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm",
                        efficiency={"compute": 0.5}).efficiency_factors().compute == 0.5
    # another engine, GPU, model class, precision or an opt-out is uncalibrated and keeps the defaults
    for other in (EngineConfig(model="llama-1b", hardware="h200", engine_style="sglang"),
                  EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm", precision="fp8"),
                  EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm", precision="fp4"),
                  EngineConfig(model="llama-1b", hardware="b200", engine_style="vllm"),
                  EngineConfig(model="llama-3.1-8b", hardware="h200", engine_style="vllm"),
                  EngineConfig(model="qwen3-30b-a3b", hardware="h200", engine_style="vllm"),
                  EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm", calibrated=False)):
        assert other.calibration_label() == UNCALIBRATED, other
        assert other.efficiency_factors().compute == pytest.approx(0.55)
    assert EngineConfig(model="qwen3-30b-a3b").model_class() == "moe-medium"
    # SKU variants share the family
    assert find_calibration(calibration_key("vllm", "h200-sxm", "dense-tiny", "bf16", 1, "auto")) is not None
    # each GPU its own fit: the H100 key (measured on the lent H100) is not the H200's
    h100 = EngineConfig(model="llama-1b", hardware="h100", engine_style="vllm").calibration()
    assert h100 is not None and h100[0] == "vllm-h100-dense-tiny" != found[0]
    assert h100[1].provenance.gpu == "NVIDIA H100 80GB HBM3"


def test_a_calibration_is_evidence_for_the_precision_it_was_fitted_at_only(user_catalog: Path) -> None:
    """The key had no precision: an FP8 or FP4 job of the dense-tiny class on an H200 was predicted with the factors
    fitted on BF16 runs (compute 0.33 of the BF16 peak applied to the FP8 one) and labelled `calibrated:
    vllm-h200-dense-tiny`, and a fit of BF16 and FP8 points together gave one set of factors for both."""
    bf16 = EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm")
    fp8 = bf16.model_copy(update={"precision": "fp8"})
    assert bf16.calibration() is not None and fp8.calibration() is None
    assert fp8.calibration_label() == UNCALIBRATED
    assert fp8.efficiency_factors() == fp8.model_copy(update={"calibrated": False}).efficiency_factors()
    truth = {"mem": 0.6}
    points = [_fixed_point(c, 2, truth) for c in (bf16, fp8)]
    # two keys, fitted apart
    assert points[0].key == ("vllm", "h200", "dense-tiny", "bf16", 1, "bf16", 1, 1) != points[1].key
    with pytest.raises(ResultError, match="several calibration keys"):
        fit_run(points, factors=("mem",), max_iter=1)
    # a fit at FP8, saved, is used for FP8 jobs and leaves the packaged BF16 one in place
    entry = CalibrationEntry(engine="vllm", hardware="h200", model_class="dense-tiny", precision="FP8", tp=1,
                             kv_dtype="bf16",
                             efficiency={"mem": 0.7}, provenance=CalibrationProvenance(run_id="r", date="2026-12-01"))
    save_calibration(user_catalog / "sim_calibration.yaml", "fp8-fit", entry)
    found = fp8.calibration()
    assert found is not None and found[0] == "fp8-fit" and fp8.efficiency_factors().mem == 0.7
    assert bf16.calibration() is not None and bf16.calibration()[0] == "vllm-h200-dense-tiny"  # type: ignore[index]
    # an entry that does not say its precision is refused naming its file, not applied to every precision
    (user_catalog / "sim_calibration.yaml").write_text(
        "calibrations:\n  mine:\n    engine: vllm\n    hardware: h200\n    model_class: dense-tiny\n"
        "    efficiency: {mem: 0.5}\n    provenance: {run_id: r, date: '2026-12-01'}\n")
    from llmsweep.catalog.sources import clear_caches

    clear_caches()
    with pytest.raises(ConfigError, match=r"sim_calibration\.yaml.*'mine'.*precision"):
        bf16.calibration()


def test_a_calibration_is_evidence_for_the_tp_and_kv_dtype_it_was_fitted_at_only(user_catalog: Path) -> None:
    """The key had no TP and no KV-cache dtype: factors fitted at TP 1 with a BF16 KV cache priced a TP 8 job with
    an FP8 one under the label `calibrated: vllm-h200-dense-tiny`, though that fit saw neither the TP 8 step's
    all-reduces nor the FP8 attention kernels. Another TP or KV dtype is uncalibrated, and its label names the
    calibration it did not use and where that was fitted."""
    measured = EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm")
    assert measured.calibration_key() == ("vllm", "h200", "dense-tiny", "bf16", 1, "bf16", 1, 1)
    # `auto` is the model's bf16, fp8_e4m3 is fp8: a key holds the format, not the spelling
    assert measured.model_copy(update={"kv_dtype": "auto"}).calibration() == measured.calibration() is not None
    defaults = measured.model_copy(update={"calibrated": False}).efficiency_factors()
    for tp, kv in ((8, "fp8_e4m3"), (2, "bf16"), (1, "fp8")):
        other = measured.model_copy(update={"tp": tp, "kv_dtype": kv})
        assert other.calibration() is None
        assert other.calibration_label() == (
            f"{UNCALIBRATED} ('vllm-h200-dense-tiny' was fitted at TP 1, bf16 KV; this engine is TP {tp}, "
            f"{'fp8' if kv.startswith('fp8') else kv} KV)")
        assert other.efficiency_factors() == defaults
    # points at two TPs are two keys, fitted apart; a fit saved at TP 8, fp8 KV prices only such jobs
    tp8 = measured.model_copy(update={"tp": 8, "kv_dtype": "fp8"})
    points = [_fixed_point(c, 2, {"mem": 0.6}) for c in (measured, tp8)]
    with pytest.raises(ResultError, match=r"several calibration keys .*tp1/kv-bf16.*tp8/kv-fp8"):
        fit_run(points, factors=("mem",), max_iter=1)
    entry = CalibrationEntry(engine="vllm", hardware="h200", model_class="dense-tiny", precision="bf16", tp=8,
                             kv_dtype="fp8_e4m3", ep=1, dp_attention=1, efficiency={"mem": 0.42},
                             provenance=CalibrationProvenance(run_id="r", date="2026-12-06"))
    save_calibration(user_catalog / "sim_calibration.yaml", entry_id(tp8.calibration_key()), entry)
    found = tp8.calibration()
    assert found is not None and found[0] == "vllm-h200-dense-tiny-bf16-tp8-kv-fp8" and found[1].kv_dtype == "fp8"
    assert tp8.efficiency_factors().mem == 0.42
    assert measured.calibration()[0] == "vllm-h200-dense-tiny"  # type: ignore[index]
    tp4 = measured.model_copy(update={"tp": 4})
    assert tp4.calibration() is None and tp4.calibration_label() == (
        f"{UNCALIBRATED} ('vllm-h200-dense-tiny' was fitted at TP 1, bf16 KV; 'vllm-h200-dense-tiny-bf16-tp8-kv-fp8' "
        "was fitted at TP 8, fp8 KV; this engine is TP 4, bf16 KV)")
    # another engine, GPU, model class or precision says nothing of the one stored
    assert measured.model_copy(update={"precision": "fp8", "tp": 4}).calibration_label() == UNCALIBRATED


def test_a_calibration_is_evidence_for_the_expert_and_attention_parallelism_it_was_fitted_at_only(
        user_catalog: Path) -> None:
    """A MoE fit at TP 8 with EP 8 and DP attention 8 absorbed the all-to-alls and the per-rank attention shapes
    into its factors: no evidence for the same model at TP 8 without them (the key had no EP or DP attention, so it
    priced both alike under one label). An entry of TP 8 saved before they were keyed matches no job (either may
    have run); one at TP 1 ran neither, so it keeps matching."""
    moe = EngineConfig(model="deepseek-v4-pro", hardware="mi355x", engine_style="sglang", tp=8, precision="fp8",
                       kv_dtype="fp8")
    wide = moe.model_copy(update={"ep": 8, "dp_attention": 8})
    key = wide.calibration_key()
    assert (key.ep, key.dp_attention) == (8, 8) and key.label.endswith("/tp8/kv-fp8/ep8/dpa8")
    assert moe.calibration_key().label.endswith("/tp8/kv-fp8")  # a key without them names neither
    entry = CalibrationEntry(engine="sglang", hardware="mi355x", model_class=key.model_class, precision="fp8", tp=8,
                             kv_dtype="fp8", ep=8, dp_attention=8, efficiency={"mem": 0.42},
                             provenance=CalibrationProvenance(run_id="r", date="2026-12-07"))
    saved_id = entry_id(key)
    assert saved_id.endswith("-tp8-kv-fp8-ep8-dpa8")
    save_calibration(user_catalog / "sim_calibration.yaml", saved_id, entry)
    found = wide.calibration()
    assert found is not None and found[0] == saved_id and wide.efficiency_factors().mem == 0.42
    assert moe.calibration() is None
    assert moe.calibration_label() == (f"{UNCALIBRATED} ('{saved_id}' was fitted at TP 8, fp8 KV, EP 8, DP attention "
                                       "8; this engine is TP 8, fp8 KV)")
    unkeyed = entry.model_copy(update={"ep": None, "dp_attention": None})
    assert unkeyed.key is None and unkeyed.unkeyed() == ["ep", "dp_attention"]
    at_tp1 = unkeyed.model_copy(update={"tp": 1})
    assert at_tp1.key is not None and (at_tp1.key.ep, at_tp1.key.dp_attention) == (1, 1) and not at_tp1.unkeyed()


def test_a_calibration_saved_before_tp_and_kv_dtype_were_keyed_loads_and_says_it_matches_no_job(
        user_catalog: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A user file written before the key had TP and KV dtype still loads (its factors are kept), but no job takes
    them: the measured TP and KV dtype are not known, and guessing them would be a label the run did not earn. The
    label of a job of its engine, GPU, class and precision names it, and a warning (once) names its file and what to
    add."""
    (user_catalog / "sim_calibration.yaml").write_text(
        "calibrations:\n  mine:\n    engine: vllm\n    hardware: h100\n    model_class: dense-small\n"
        "    precision: bf16\n    efficiency: {mem: 0.5}\n    provenance: {run_id: r, date: '2026-11-01'}\n")
    from llmsweep.catalog.sources import clear_caches

    clear_caches()
    from llmsweep.sim.calibration import load_calibrations

    stored = load_calibrations()["mine"]
    assert stored.key is None and stored.unkeyed() == ["tp", "kv_dtype"] and stored.efficiency == {"mem": 0.5}
    config = EngineConfig(model="llama-3.1-8b", hardware="h100", engine_style="vllm")
    with caplog.at_level("WARNING", logger="llmsweep.sim.calibration"):
        assert config.calibration() is None
        assert config.calibration_label() == (
            f"{UNCALIBRATED} ('mine' records no tp or kv_dtype; this engine is TP 1, bf16 KV)")
        config.model_copy(update={"tp": 2}).calibration_label()
    (warning,) = [r.getMessage() for r in caplog.records]
    assert str(user_catalog / "sim_calibration.yaml") in warning and "'mine'" in warning
    assert "add `tp:` and `kv_dtype:`" in warning
    assert config.efficiency_factors().mem == pytest.approx(0.75)  # the defaults, not its 0.5
    # keyed as its runs were launched, it applies again
    text = (user_catalog / "sim_calibration.yaml").read_text()
    (user_catalog / "sim_calibration.yaml").write_text(text.replace("    precision: bf16\n",
                                                                    "    precision: bf16\n    tp: 1\n"
                                                                    "    kv_dtype: auto\n"))
    clear_caches()
    assert config.calibration_label().startswith("calibrated: mine") and config.efficiency_factors().mem == 0.5


def test_the_warning_of_an_entry_saved_before_ep_and_dp_attention_were_keyed_names_what_it_lacks(
        user_catalog: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A TP 8 entry that records its TP and KV dtype but not EP and DP attention was warned about as 'saved before
    calibrations were keyed by TP and KV-cache dtype … add `tp:` and `kv_dtype:`' — both of which it has. The warning
    is worded from what the entry lacks."""
    (user_catalog / "sim_calibration.yaml").write_text(
        "calibrations:\n  wide:\n    engine: sglang\n    hardware: mi355x\n    model_class: moe-large\n"
        "    precision: fp8\n    tp: 8\n    kv_dtype: fp8\n    efficiency: {mem: 0.5}\n"
        "    provenance: {run_id: r, date: '2026-12-06'}\n")
    from llmsweep.catalog.sources import clear_caches

    clear_caches()
    moe = EngineConfig(model="deepseek-v4-pro", hardware="mi355x", engine_style="sglang", tp=8, precision="fp8",
                       kv_dtype="fp8")
    assert moe.calibration_key().model_class == "moe-large"
    with caplog.at_level("WARNING", logger="llmsweep.sim.calibration"):
        assert moe.calibration_label() == (
            f"{UNCALIBRATED} ('wide' records no ep or dp_attention; this engine is TP 8, fp8 KV)")
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "'wide'" in warning and "records no ep or dp_attention" in warning, warning
    assert "keyed by EP and DP attention" in warning and "add `ep:` and `dp_attention:`" in warning, warning
    assert "tp:" not in warning and "KV-cache dtype" not in warning, warning


def test_an_entry_of_a_model_without_experts_saved_before_ep_was_keyed_keys_ep_as_1(user_catalog: Path) -> None:
    """Expert parallelism shards only routed experts (and the simulator prices EP as none for a model without them):
    a TP 8 entry of a dense or hybrid class that records no `ep` was fitted at EP 1, and is keyed so once its DP
    attention is recorded. DP attention applies to any model: unrecorded at TP 8, the entry still matches no job,
    and says so. A MoE class's unrecorded EP stays unknown."""
    from llmsweep.sim.calibration import load_calibrations, moe_class

    assert [moe_class(k) for k in ("dense-tiny", "hybrid-small+mtp", "moe-large", "hybrid-moe-tiny+mtp")] == [
        False, False, True, True]
    (user_catalog / "sim_calibration.yaml").write_text(
        "calibrations:\n  dense:\n    engine: vllm\n    hardware: h200\n    model_class: dense-tiny\n"
        "    precision: bf16\n    tp: 8\n    kv_dtype: bf16\n    dp_attention: 1\n    efficiency: {mem: 0.42}\n"
        "    provenance: {run_id: r, date: '2026-12-06'}\n"
        "  dense-unknown-dpa:\n    engine: vllm\n    hardware: h200\n    model_class: dense-small\n"
        "    precision: bf16\n    tp: 8\n    kv_dtype: bf16\n    efficiency: {mem: 0.42}\n"
        "    provenance: {run_id: r, date: '2026-12-06'}\n"
        "  moe:\n    engine: vllm\n    hardware: h200\n    model_class: moe-large\n"
        "    precision: bf16\n    tp: 8\n    kv_dtype: bf16\n    dp_attention: 1\n    efficiency: {mem: 0.42}\n"
        "    provenance: {run_id: r, date: '2026-12-06'}\n")
    from llmsweep.catalog.sources import clear_caches

    clear_caches()
    loaded = load_calibrations()
    assert loaded["dense"].unkeyed() == [] and loaded["dense"].key is not None
    assert (loaded["dense"].key.ep, loaded["dense"].key.dp_attention) == (1, 1)
    assert loaded["dense-unknown-dpa"].unkeyed() == ["dp_attention"] and loaded["moe"].unkeyed() == ["ep"]
    dense = EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm", tp=8)
    assert dense.calibration_key().model_class == "dense-tiny"
    found = dense.calibration()
    assert found is not None and found[0] == "dense" and dense.efficiency_factors().mem == 0.42


def test_a_dense_job_launched_with_ep_takes_the_ep_1_calibration_of_its_class(user_catalog: Path) -> None:
    """Expert parallelism shards nothing of a dense model (the roofline prices it as none): a dense job launched at
    EP 8 is the EP 1 job, and takes the EP 1 entry of its class, which its key had missed (`.../tp8/kv-bf16/ep8`).
    A dense fit saved with EP 8 keys as EP 1 too; a MoE job's EP stays in its key."""
    dense = EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm", tp=8)
    with_ep = dense.model_copy(update={"ep": 8})
    assert with_ep.calibration_key() == dense.calibration_key() and with_ep.calibration_key().ep == 1
    assert with_ep.calibration_key().label.endswith("/tp8/kv-bf16")
    key = dense.calibration_key()
    entry = CalibrationEntry(engine="vllm", hardware="h200", model_class=key.model_class, precision="bf16", tp=8,
                             kv_dtype="bf16", ep=1, dp_attention=1, efficiency={"mem": 0.42},
                             provenance=CalibrationProvenance(run_id="r", date="2026-12-07"))
    save_calibration(user_catalog / "sim_calibration.yaml", entry_id(key), entry)
    found = with_ep.calibration()
    assert found is not None and found[0] == entry_id(key) and with_ep.efficiency_factors().mem == 0.42
    assert with_ep.calibration_label().startswith(f"calibrated: {entry_id(key)}")
    saved_at_ep8 = entry.model_copy(update={"ep": 8})
    assert saved_at_ep8.key == key
    moe = EngineConfig(model="deepseek-v4-pro", hardware="mi355x", engine_style="sglang", tp=8, precision="fp8",
                       kv_dtype="fp8", ep=8)
    assert moe.calibration_key().ep == 8


def test_a_saved_user_calibration_is_picked_up(user_catalog: Path) -> None:
    config = EngineConfig(model="llama-3.1-8b", hardware="h100", engine_style="sglang")
    assert config.calibration_label() == UNCALIBRATED
    entry = CalibrationEntry(engine="sglang", hardware="h100", model_class="dense-small", precision="bf16", tp=1,
                             kv_dtype="auto",
                             efficiency={"mem": 0.61, "step_s": 0.002},
                             provenance=CalibrationProvenance(run_id="run-x", date="2026-11-01",
                                                              engine_version="sglang 0.5.9", gpu="NVIDIA H100"))
    save_calibration(user_catalog / "sim_calibration.yaml", "my-fleet", entry)
    assert config.calibration_label() == "calibrated: my-fleet (sglang 0.5.9, NVIDIA H100, 2026-11-01)"
    eff = config.efficiency_factors()
    assert (eff.mem, eff.step_s) == (0.61, 0.002)
    assert eff.per_seq_s == pytest.approx(20e-6)  # unfitted factors keep the engine's defaults


def test_calibrate_save_writes_a_user_file_that_predictions_use(poor_h200_calibration: Path, tmp_path: Path) -> None:
    user_catalog = poor_h200_calibration  # a calibration in effect that the quick fit beats (else it is not saved)
    # two fixed-length points of the H200 run are enough for a quick fit of two factors
    run = tmp_path / "run"
    for job in sorted((H200_RUN / "llama" / "jobs").glob("llama-1b_1024_256_*conc[14]_*")):
        shutil.copytree(job, run / "jobs" / job.name)
    shutil.copy(H200_RUN / "llama" / "run.json", run / "run.json")
    out = CliRunner().invoke(calibrate_cmd, [str(run), "--max-iter", "1", "--factors", "mem,frontend_s", "--save",
                                             "--json"])
    assert out.exit_code == 0, out.output
    saved = json.loads(out.stdout)
    assert saved["saved"] == [str(user_catalog / "sim_calibration.yaml")]
    stored = find_calibration(calibration_key("vllm", "h200", "dense-tiny", "bf16", 1, "bf16"))
    assert stored is not None and stored[0] == "vllm-h200-dense-tiny-bf16-tp1-kv-bf16"
    assert stored[1].provenance.run_id == json.loads((run / "run.json").read_text())["run_id"]  # the run fitted
    assert stored[1].provenance.jobs == 2 and stored[1].provenance.gpu == "NVIDIA H200"
    fitted = saved["calibrations"][0]["efficiency"]
    assert set(fitted) == {"mem", "frontend_s"}  # only the factors asked for are stored
    assert stored[1].efficiency == {k: pytest.approx(v, rel=1e-3) for k, v in fitted.items()}
    assert EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm").efficiency_factors().mem == \
        pytest.approx(fitted["mem"], rel=1e-3)


def test_a_fit_worse_than_the_calibration_in_effect_is_said_and_never_saved(user_catalog: Path,
                                                                            tmp_path: Path) -> None:
    """`sim calibrate --factors mem,compute --out F` printed `fit error 32.0% -> 34.6%` and saved the fit over a
    calibration in effect that predicted the points at 14.9 %: its *before* was the defaults, and nothing compared
    the fit with either before saving. The *before* is now the calibration in effect, and a fit that does not beat
    it is not stored (exit 1, the reason said)."""
    run = tmp_path / "run"  # the two points and two factors of the save test above, against the packaged fit
    for job in sorted((H200_RUN / "llama" / "jobs").glob("llama-1b_1024_256_*conc[14]_*")):
        shutil.copytree(job, run / "jobs" / job.name)
    shutil.copy(H200_RUN / "llama" / "run.json", run / "run.json")
    target = tmp_path / "mine.yaml"
    args = [str(run), "--max-iter", "1", "--factors", "mem,frontend_s"]
    out = CliRunner().invoke(calibrate_cmd, [*args, "--out", str(target), "--json"])
    assert isinstance(out.exception, ResultError) and out.exit_code == 1, out.output
    assert not target.exists()  # nothing stored
    doc = json.loads(out.stdout)  # --json says the same as the text
    (fit,) = doc["calibrations"]
    assert fit["in_effect"] == "vllm-h200-dense-tiny" and fit["before"] == "the calibration in effect, " \
        "'vllm-h200-dense-tiny'"
    assert fit["error_before"] < fit["error_after"] < fit["error_defaults"]  # measured: 2.9 % / 18.5 % / 36.4 %
    assert not fit["improves"] and doc["saved"] == []
    (why,) = doc["not_saved"]
    assert why.startswith("vllm/h200/dense-tiny/bf16/tp1/kv-bf16: the fit's error ") and "stays in effect" in why
    assert why in str(out.exception) and out.exception.fix
    # each point's *before* is what predictions of the key use now, not the defaults
    point = fit["points"][0]
    config = EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm")
    replay = _replays([measured_point(next((run / "jobs").glob("*conc1_*")), _config_for_job)])[0]
    assert point["before"] == predict_metrics(replay, dict(config.calibration()[1].efficiency))  # type: ignore[index]
    # without --save or --out the fit is shown and said not to improve; nothing fails
    out = CliRunner().invoke(calibrate_cmd, args)
    assert out.exit_code == 0, out.output
    assert "before: the calibration in effect, 'vllm-h200-dense-tiny'" in " ".join(out.stdout.split())
    assert "warning: no improvement" in out.stdout and "--save and --out do not store it" in out.stdout
    assert "also sets compute, step_s, per_seq_s, frontend_per_request_s" in " ".join(out.stdout.split())  # dropped


def test_predict_says_uncalibrated_outside_a_calibrated_key(user_catalog: Path) -> None:
    # one process: the label is what is checked here (tests/e2e/test_predict_parallel.py checks the worker pool)
    out = CliRunner().invoke(predict_cmd, [str(REPO / "examples" / "quickstart.yaml"), "--duration", "3",
                                           "--max-requests", "3", "--processes", "1", "--json"])
    assert out.exit_code == 0, out.output
    results = json.loads(out.stdout)
    assert results and all(r["calibration"] == UNCALIBRATED for r in results)
    assert all(r["summary"]["provenance"]["calibration"] == UNCALIBRATED for r in results)


def test_calibrating_on_the_h200_vllm_run_lowers_the_error(user_catalog: Path) -> None:
    # the first two runs only (a later run beside them, such as the hybrid class's calibration, is its own test);
    # one iteration from each start (the stored calibration's already ends below the bound)
    out = CliRunner().invoke(calibrate_cmd, [str(H200_RUN / "llama"), str(H200_RUN / "qwen3next"), "--max-iter", "1",
                                             "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    (fit,) = doc["calibrations"]
    assert fit["key"] == {"engine": "vllm", "hardware": "h200", "model_class": "dense-tiny",
                          "precision": "bf16", "tp": 1, "kv_dtype": "bf16", "ep": 1, "dp_attention": 1}
    assert fit["error_after"] < fit["error_before"]
    # measured on this run: 36.6 % -> 7.2 % with the front end's load term (the packaged fit of 2026-12-06, since a
    # fixed-length warm-up is a phase of its own: 3.6 % before, when warm-up requests shared the window)
    assert fit["error_after"] < 0.08 and fit["started_from"] == "the stored calibration"
    assert "frontend_per_request_s" in fit["efficiency"]  # five concurrencies: the load term is fitted
    labels = {p["label"] for p in fit["points"]}
    assert labels == {f"fixed 1024/256 c{c}" for c in (1, 4, 16, 64, 128)}
    # the agentic points recorded no corpus digest, and the synthetic generator has changed since: their replays'
    # answers average hundreds of tokens where the measured ones averaged 6-15, so they are not fitted
    left_out = fit["left_out"]
    assert len(left_out) == 5 and all("recorded no corpus digest" in why for why in left_out)
    pattern = r"average [\d,]+ output tokens where the measured ones averaged \d+:"
    assert all(re.search(pattern, why) for why in left_out)
    # the Qwen3-Next MTP points are their own key (hybrid-moe-tiny+mtp), never folded into the dense fit: the
    # wrong-pin control is refused (its read-back failed) and the two agentic points cannot carry six factors
    skipped = doc["skipped"]
    assert len(skipped) == 2
    assert "conc4" in skipped[0] and "failed its read-back" in skipped[0]
    assert skipped[1].startswith("vllm/h200/hybrid-moe-tiny+mtp/bf16") and "cannot constrain" in skipped[1]


def test_the_three_h100_runs_calibrate_on_every_point_their_agentic_ones_from_the_corpus_each_kept(
        user_catalog: Path, caplog: pytest.LogCaptureFixture) -> None:
    """One recipe on three lent H100s (docs/gpu.md sections 15 and 16): each run kept its synthetic corpus, so every
    agentic point is replayed from its own run's file with the digest checked, none is left out, and the packaged
    fit over the three stays near its stated error, which sits just above what any one key can do over machines
    this far apart (11.5 %)."""
    root = REPO / "examples" / "results" / "h100-vllm-0.26.0"
    runs = [root / "llama", root / "llama-b", root / "llama-c"]
    if not all(r.is_dir() for r in runs):
        pytest.skip("the H100 evidence is not in this checkout")
    with caplog.at_level("WARNING", logger="llmsweep.sim.calibrate"):
        out = CliRunner().invoke(calibrate_cmd, [*map(str, runs), "--max-iter", "1", "--json"])
    assert out.exit_code == 0, out.output
    assert "corpus digest" not in caplog.text  # every replay verified, none merely rebuilt
    (fit,) = json.loads(out.stdout)["calibrations"]
    assert fit["key"] == {"engine": "vllm", "hardware": "h100", "model_class": "dense-tiny",
                          "precision": "bf16", "tp": 1, "kv_dtype": "bf16", "ep": 1, "dp_attention": 1}
    labels = [p["label"] for p in fit["points"]]
    fixed = {f"fixed 1024/256 c{c}" for c in (1, 4, 16, 64, 128)}
    assert sorted(labels) == sorted(3 * [*fixed, *(f"agentic c{c}" for c in (1, 4, 8, 16, 32))])
    assert not fit["left_out"]
    assert len(fit["provenance"]["run_id"].split(" + ")) == 3
    # the packaged entry says 37.1 % -> 14.9 %: one iteration from it stays there; the *before* is that entry
    assert fit["started_from"] == "the stored calibration" and fit["error_after"] < 0.15 < fit["error_defaults"]
    assert fit["in_effect"] == "vllm-h100-dense-tiny" and fit["error_before"] == pytest.approx(0.1486, abs=0.005)
    for run in runs:
        assert len(list((run / "traces").glob("*.jsonl.gz"))) == 1


def test_calibrate_refuses_unknown_factors_and_folders_without_jobs(tmp_path: Path) -> None:
    out = CliRunner().invoke(calibrate_cmd, [str(H200_RUN / "llama"), "--factors", "mem,warp_speed"])
    assert isinstance(out.exception, ConfigError) and "warp_speed" in str(out.exception)  # the CLI exits 2
    out = CliRunner().invoke(calibrate_cmd, [str(tmp_path)])
    assert isinstance(out.exception, DatasetError) and "no job folder" in str(out.exception)


def _agentic_copy(tmp_path: Path, digest: str | None) -> Path:
    """The committed llama run copied, its agentic point's summary carrying `digest` as the corpus it replayed."""
    run = tmp_path / "llama"
    shutil.copytree(H200_RUN / "llama", run)
    (summary_path,) = run.glob("jobs/*_kvnone_*conc16*/summary.json")
    summary = json.loads(summary_path.read_text())
    summary["provenance"]["workload"]["corpus_digest"] = digest
    summary_path.write_text(json.dumps(summary))
    return summary_path.parent


def test_calibrate_refuses_a_point_whose_rebuilt_traces_differ(user_catalog: Path, tmp_path: Path) -> None:
    recorded = "sha256:" + "0" * 64
    job = _agentic_copy(tmp_path, recorded)
    out = CliRunner().invoke(calibrate_cmd, [str(tmp_path / "llama"), "--json"])
    assert isinstance(out.exception, DatasetError), out.output
    message = str(out.exception)
    rebuilt = _replay_digest(job)
    assert job.name in message and recorded in message and rebuilt in message and rebuilt != recorded
    assert "keep the trace file" in (out.exception.fix or "")


def _replay_digest(job: Path) -> str:
    """The digest of the corpus calibrate rebuilds for `job` (checked against nothing)."""
    point = measured_point(job, _config_for_job)
    point = MeasuredPoint(**{**point.__dict__, "corpus_digest": None})
    (replay,) = _replays([point])
    assert isinstance(replay.workload, AgenticWorkload)
    return replay.workload.corpus_digest


def test_calibrate_replays_a_point_whose_digest_matches_and_warns_on_older_evidence(
        user_catalog: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    job = _agentic_copy(tmp_path, None)
    with caplog.at_level("WARNING", logger="llmsweep.sim.calibrate"):
        digest = _replay_digest(job)  # recorded without a digest: replayed, with a warning
    assert "recorded no corpus digest" in caplog.text and "cannot be verified" in caplog.text
    caplog.clear()
    job = _agentic_copy(tmp_path / "again", digest)
    point = measured_point(job, _config_for_job)
    assert point.corpus_digest == digest
    with caplog.at_level("WARNING", logger="llmsweep.sim.calibrate"):
        (replay,) = _replays([point])
    assert "corpus digest" not in caplog.text
    assert isinstance(replay.workload, AgenticWorkload) and replay.workload.corpus_digest == digest


def test_calibrate_replays_the_corpus_a_run_kept_when_the_generator_now_gives_other_traces(
        user_catalog: Path, tmp_path: Path) -> None:
    """A run that measured a real engine keeps its synthetic corpus (`RUN/traces/<digest>.jsonl`): calibrate
    replays that file, so a changed generator no longer strands the run's agentic points. Stood in for here by a
    kept corpus of another seed than the job's profile now gives (as a changed generator would)."""
    from llmsweep.workload.build import synthetic_profile
    from llmsweep.workload.traces.kept import keep_synthetic

    plain = _agentic_copy(tmp_path / "plain", None)
    resolved = json.loads((plain / "job.json").read_text())["workload"]
    traces = ResolvedWorkload.model_validate(resolved).traces
    assert traces is not None
    profile = synthetic_profile(traces)
    assert profile is not None
    other = profile.model_copy(update={"seed": profile.seed + 1})
    kept, wrote = keep_synthetic(tmp_path / "elsewhere", other)
    assert wrote and keep_synthetic(tmp_path / "elsewhere", other) == (kept, False)  # written once
    digest = replay_corpus_digest(str(kept))
    assert digest != _replay_digest(plain)  # the profile alone now gives other traces
    job = _agentic_copy(tmp_path, digest)
    kept = Path(shutil.move(kept.parent, tmp_path / "llama" / "traces")) / kept.name
    (replay,) = _replays([measured_point(job, _config_for_job)])
    assert isinstance(replay.workload, AgenticWorkload)
    assert replay.workload.corpus_digest == digest and replay.workload.config.source == str(kept)
    kept.unlink()  # without the kept file the same point is refused, as before
    with pytest.raises(DatasetError, match="replayed traces"):
        _replays([measured_point(job, _config_for_job)])


def test_a_hold_out_of_only_unverifiable_points_stops_before_fitting(user_catalog: Path) -> None:
    """`--hold-out 'agentic *'` on the H200 Llama run held out only points whose traces cannot be verified: it
    printed `nan% -> nan%` and --json wrote NaN."""
    from llmsweep.sim.calibrate import hold_out, measured_groups

    (points,) = measured_groups([H200_RUN / "llama"], _config_for_job)[0].values()
    with pytest.raises(ResultError) as err:
        hold_out(points, ["agentic *"], max_iter=1)
    assert "every held-out point is left out" in str(err.value) and "recorded no corpus digest" in str(err.value)
