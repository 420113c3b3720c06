"""Engine facts, version gates and known incompatibilities: what policy asks before a GPU hour is spent."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.catalog.engines import (
    canonical_engine,
    check_knob,
    check_launch,
    feature_gates,
    get_engine,
    honours,
    match_incompatibilities,
)
from llmsweep.catalog.images import parse_image
from llmsweep.errors import ConfigError


def test_endpoint_facts_for_adapters() -> None:
    sglang = get_engine("sglang")
    assert sglang.default_port == 30000 and sglang.metric_prefix == "sglang:"
    assert "The server is fired up and ready to roll!" in sglang.ready_markers
    vllm = get_engine("dynamo-vllm")
    assert vllm.id == "vllm" and vllm.default_port == 8000 and vllm.metric_prefix == "vllm:"
    assert vllm.health_path == "/health" and vllm.metrics_path == "/metrics"
    for engine in ("sglang", "vllm", "trtllm", "atom", "sim"):
        assert get_engine(engine).ready_markers


@pytest.mark.parametrize(
    ("framework", "engine"),
    [("sglang-disagg", "sglang"), ("trt", "trtllm"), ("atom-disagg", "atom"), ("llmd-vllm", "vllm"),
     ("SGLang", "sglang")],
)
def test_framework_spellings(framework: str, engine: str) -> None:
    assert canonical_engine(framework) == engine


def test_unknown_engine_lists_known() -> None:
    with pytest.raises(ConfigError, match="sglang"):
        canonical_engine("tilert")


def test_required_gates_exist() -> None:
    names = {(g.engine, g.kind, g.name) for g in feature_gates()}
    assert {
        ("sglang", "env", "SGLANG_SIMULATE_ACC_TOKEN_MODE"),
        ("sglang", "env", "SGLANG_SIMULATE_ACC_LEN"),
        ("sglang", "env", "SGLANG_SIMULATE_ACC_METHOD"),
        ("sglang", "env", "SGLANG_ENABLE_SPEC_V2"),
        ("vllm", "speculative-config-key", "synthetic_acceptance_length"),
        ("vllm", "speculative-config-key", "rejection_sample_method"),
        ("atom", "arg", "spec-decode-acceptance-length"),
        ("trtllm", "env", "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"),
    } <= names
    for gate in feature_gates():
        assert gate.evidence and gate.message


def test_token_mode_is_honoured_only_from_0_5_16() -> None:
    old = check_knob("sglang", "0.5.12", "SGLANG_SIMULATE_ACC_TOKEN_MODE")
    assert old.honoured is False and "silently ignores" in old.reason
    assert honours("sglang", "0.5.16", "SGLANG_SIMULATE_ACC_TOKEN_MODE") is True
    assert honours("sglang", "0.5.17", "SGLANG_SIMULATE_ACC_TOKEN_MODE") is True
    assert honours("sglang", "0.5.15.post1", "SGLANG_SIMULATE_ACC_TOKEN_MODE") is False
    assert honours("sglang", None, "SGLANG_SIMULATE_ACC_TOKEN_MODE") is None  # nightly: unknown, not a pass


def test_seed_images_against_the_token_mode_gate() -> None:
    seed = parse_image("lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730")
    previous = parse_image("lmsysorg/sglang:v0.5.12-rocm720-mi30x")
    assert honours(seed.engine or "", seed.version, "SGLANG_SIMULATE_ACC_TOKEN_MODE") is True
    assert honours(previous.engine or "", previous.version, "SGLANG_SIMULATE_ACC_TOKEN_MODE") is False


def test_check_launch_reports_only_gated_knobs() -> None:
    verdicts = check_launch(
        "sglang",
        "0.5.12",
        env={"SGLANG_SIMULATE_ACC_LEN": "3.39", "SGLANG_SIMULATE_ACC_METHOD": "match-expected",
             "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token", "HF_HOME": "/x"},
        args={"--tp": "8", "--speculative-num-steps": "3"},
    )
    by_name = {v.name: v for v in verdicts}
    assert set(by_name) == {"SGLANG_SIMULATE_ACC_LEN", "SGLANG_SIMULATE_ACC_METHOD", "SGLANG_SIMULATE_ACC_TOKEN_MODE"}
    assert by_name["SGLANG_SIMULATE_ACC_TOKEN_MODE"].honoured is False
    assert by_name["SGLANG_SIMULATE_ACC_LEN"].honoured is True


def test_vllm_value_specific_gate_and_estimate_flag() -> None:
    v = check_knob("vllm", "0.11.0", "rejection_sample_method", "speculative-config-key", "synthetic")
    assert v.honoured is False and v.gate is not None and v.gate.estimate
    assert "estimate" in v.reason
    ordinary = check_knob("vllm", "0.11.0", "rejection_sample_method", "speculative-config-key", "strict")
    assert ordinary.gate is None and ordinary.honoured is None
    assert honours("vllm", "0.26.0", "synthetic_acceptance_length") is True


def test_atom_arg_gate_accepts_dashed_spelling() -> None:
    assert check_knob("atom", "0.1.3", "--spec-decode-acceptance-length").gate is not None


SEED = {"engine": "sglang", "platform": "rocm", "model_family": "qwen3.5", "kv_offloading": "dram"}


def test_hicache_kernel_page_first_faults_on_rocm_0_5_16() -> None:
    hits = match_incompatibilities(
        version="0.5.16", args={"--hicache-io-backend": "kernel", "--hicache-mem-layout": "page_first"}, env={}, **SEED
    )
    assert [h.id for h in hits] == ["sglang-rocm-hicache-hybrid-kernel-page-first"]
    assert hits[0].severity == "error"
    assert "page_first_direct" in hits[0].fix and "#2693" in hits[0].fix


def test_hicache_direct_layer_first_rejected_on_rocm_0_5_16() -> None:
    hits = match_incompatibilities(
        version="0.5.16", args={"hicache_io_backend": "direct", "hicache_mem_layout": "layer_first"}, env={}, **SEED
    )
    assert [h.id for h in hits] == ["sglang-rocm-hicache-hybrid-direct-layer-first"]
    assert "#2563" in hits[0].evidence


@pytest.mark.parametrize(
    "change",
    [
        {"version": "0.5.19"},  # kernel / page_first runs again from 0.5.19 (InferenceX #3118); 0.5.17-0.5.18 faulted
        {"platform": "cuda"},
        {"model_family": "dsv4"},
        {"kv_offloading": "none"},
        {"args": {"hicache-io-backend": "direct", "hicache-mem-layout": "page_first_direct"}},  # the fix itself
    ],
)
def test_hicache_rules_do_not_fire_outside_their_conditions(change: dict) -> None:
    call = {**SEED, "version": "0.5.16", "env": {},
            "args": {"hicache-io-backend": "kernel", "hicache-mem-layout": "page_first"}, **change}
    assert match_incompatibilities(**call) == []


def test_unknown_version_still_matches() -> None:
    hits = match_incompatibilities(
        version=None, args={"hicache-io-backend": "kernel", "hicache-mem-layout": "page_first"}, env={}, **SEED
    )
    assert hits


def test_user_incompatibility_fires(user_catalog: Path) -> None:
    (user_catalog / "incompatibilities.yaml").write_text(
        """\
incompatibilities:
  vllm-cuda-graph-oom:
    engine: vllm
    min_version: 0.26.0
    platforms: [cuda]
    conditions:
      env: {VLLM_USE_V1: "0"}
      args: {enforce-eager: null}
    severity: warning
    message: V0 engine with CUDA graphs runs out of memory on long contexts
    fix: set VLLM_USE_V1=1 or pass --enforce-eager
    evidence: our own run 2026-11-29
"""
    )
    hits = match_incompatibilities("vllm", "0.27.1", "cuda", "llama3.1", args={"max-model-len": "131072"},
                                   env={"VLLM_USE_V1": "0"}, kv_offloading=None)
    assert [h.id for h in hits] == ["vllm-cuda-graph-oom"]
    assert match_incompatibilities("vllm", "0.27.1", "cuda", "llama3.1", args={"enforce-eager": True},
                                   env={"VLLM_USE_V1": "0"}, kv_offloading=None) == []
    # the packaged entries are still there
    assert match_incompatibilities(version="0.5.16", env={},
                                   args={"hicache-io-backend": "kernel", "hicache-mem-layout": "page_first"}, **SEED)


def test_user_gate_added_next_to_packaged_ones(user_catalog: Path) -> None:
    (user_catalog / "engines.yaml").write_text(
        """\
gates:
  vllm.my-env:
    engine: vllm
    kind: env
    name: VLLM_MY_FEATURE
    min_version: 0.27.0
    evidence: release notes
    message: my feature
"""
    )
    assert honours("vllm", "0.26.0", "VLLM_MY_FEATURE") is False
    assert honours("sglang", "0.5.12", "SGLANG_SIMULATE_ACC_TOKEN_MODE") is False
    assert get_engine("vllm").default_port == 8000


def test_model_and_platform_may_be_named_as_the_recipe_names_them() -> None:
    hits = match_incompatibilities(
        "sglang-disagg", "0.5.16", "cluster:mi300x-amds", "Qwen/Qwen3.5-397B-A17B-FP8",
        args={"--hicache-io-backend": "direct", "--hicache-mem-layout": "layer_first"}, env={}, kv_offloading="dram",
    )
    assert [h.id for h in hits] == ["sglang-rocm-hicache-hybrid-direct-layer-first"]
    assert match_incompatibilities(
        "sglang", "0.5.16", "h200", "qwen3.5",
        args={"--hicache-io-backend": "direct", "--hicache-mem-layout": "layer_first"}, env={}, kv_offloading="dram",
    ) == []


_VLLM_ENTRY = """\
engines:
  vllm:
    display_name: vLLM (site build)
    {extra}
    default_port: 8100
    health_path: /health
    metrics_path: /metrics
    ready_markers: ["Application startup complete."]
    source: site build
"""


@pytest.mark.parametrize("extra", ["", "frameworks: [vllm, dynamo-vllm, llmd-vllm]", 'metric_prefix: "vllm:"'])
def test_a_user_entry_may_restate_the_identity(user_catalog: Path, extra: str) -> None:
    (user_catalog / "engines.yaml").write_text(_VLLM_ENTRY.format(extra=extra))
    info = get_engine("dynamo-vllm")
    assert info.default_port == 8100 and info.metric_prefix == "vllm:" and "llmd-vllm" in info.frameworks


@pytest.mark.parametrize(("extra", "says"), [("frameworks: [vllm, my-vllm]", "my-vllm"),
                                             ('metric_prefix: "myvllm:"', "myvllm:")])
def test_a_user_entry_cannot_contradict_the_identity(user_catalog: Path, extra: str, says: str) -> None:
    (user_catalog / "engines.yaml").write_text(_VLLM_ENTRY.format(extra=extra))
    with pytest.raises(ConfigError, match=says) as err:
        get_engine("vllm")
    assert "engine_ids.py" in str(err.value)


def test_an_engine_only_the_catalog_names_keeps_its_own_spellings(user_catalog: Path) -> None:
    (user_catalog / "engines.yaml").write_text(
        _VLLM_ENTRY.format(extra="").replace("  vllm:", "  tilert:")
        .replace("display_name: vLLM (site build)", "display_name: TileRT\n    frameworks: [tilert, tilert-disagg]")
    )
    assert canonical_engine("tilert-disagg") == "tilert" and canonical_engine("dynamo-vllm") == "vllm"


@pytest.mark.parametrize(("version", "honoured"), [
    ("1.3.0rc5", False), ("1.3.0rc13", False), ("1.3.0rc14", True), ("1.3.0", True), ("1.3.1rc1", True),
    ("1.2.0", False),
])
def test_a_gate_whose_bound_is_a_pre_release_compares_pre_releases(version: str, honoured: bool) -> None:
    """TensorRT-LLM's forced acceptance is honoured from 1.3.0rc14: comparing releases alone (rc5 is 1.3.0) let
    1.3.0rc5 pass, whose int() parse reads 1.49 as 0 — no forced acceptance. A bound without a pre-release still
    compares releases (`0.26.0rc1` is 0.26.0)."""
    from llmsweep.catalog.engines import check_knob

    verdict = check_knob("trtllm", version, "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS", value="1.49")
    assert verdict.honoured is honoured, verdict


# A condition on a flag the launch leaves unset is matched against the engine's parser default for the image's
# version (engine_flags.yaml `defaults`, read in SGLang's wheels): kernel I/O in 0.5.9-0.5.19, layer_first layout in
# 0.5.9-0.5.13 and page_first from 0.5.14. Where no default is recorded (an image naming no version, a release not
# read) the condition is not guessed.
@pytest.mark.parametrize(
    ("version", "args", "expected"),
    [
        # --hicache-mem-layout unset: 0.5.12's layer_first with direct is the rejected combination
        ("0.5.12", {"hicache-io-backend": "direct"}, ["sglang-rocm-hicache-hybrid-direct-layer-first"]),
        ("0.5.13", {"hicache-io-backend": "direct"}, ["sglang-rocm-hicache-hybrid-direct-layer-first"]),
        # from 0.5.14 the default layout is page_first (SGLang turns it into page_first_direct with direct I/O)
        ("0.5.16", {"hicache-io-backend": "direct"}, []),
        # --hicache-io-backend unset: its default kernel with page_first faults
        ("0.5.16", {"hicache-mem-layout": "page_first"}, ["sglang-rocm-hicache-hybrid-kernel-page-first"]),
        # both unset: 0.5.16 launches kernel / page_first; 0.5.12 kernel / layer_first, which neither entry names
        ("0.5.16", {}, ["sglang-rocm-hicache-hybrid-kernel-page-first"]),
        ("0.5.12", {}, []),
        # the recipe's own value wins over the default
        ("0.5.16", {"hicache-mem-layout": "page_first_direct"}, []),
        # no default recorded: a nightly image, a release newer than those read
        (None, {"hicache-io-backend": "direct"}, []),
        (None, {"hicache-mem-layout": "page_first"}, []),
        ("0.5.8", {"hicache-io-backend": "direct"}, []),
    ],
)
def test_unset_condition_flag_takes_the_engine_default(version: str | None, args: dict, expected: list[str]) -> None:
    hits = match_incompatibilities(version=version, args=args, env={}, **SEED)
    assert [h.id for h in hits] == expected


def test_flag_default_by_version_and_spelling() -> None:
    from llmsweep.catalog.engines import flag_default

    assert flag_default("sglang", "--hicache-mem-layout", "0.5.12.post1").value == "layer_first"  # type: ignore[union-attr]
    assert flag_default("sglang-disagg", "hicache_mem_layout", "0.5.17").value == "page_first"  # type: ignore[union-attr]
    assert flag_default("sglang", "--hicache-io-backend", "0.5.19").value == "kernel"  # type: ignore[union-attr]
    assert flag_default("sglang", "--hicache-io-backend", "0.5.20") is None
    assert flag_default("sglang", "--hicache-io-backend", None) is None
    assert flag_default("vllm", "--hicache-io-backend", "0.26.0") is None
