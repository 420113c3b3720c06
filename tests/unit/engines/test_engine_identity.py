"""Every engine's identity is registered once and every room reads the same one: framework spellings, aliases, env
prefixes, image patterns, acceptance-length spelling and server-metric prefix."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import get_args

import pytest
import yaml

from llmsweep import engine_ids, engines
from llmsweep.catalog.engines import all_engines, canonical_engine, get_engine
from llmsweep.catalog.images import parse_image
from llmsweep.engine_ids import ENGINE_IDS, EngineId, EngineIdentity, engine_for, unresolved_reason
from llmsweep.errors import ConfigError
from llmsweep.metrics import server
from llmsweep.plan import Job
from llmsweep.spec import engine_name

Plan = Callable[[str], list[Job]]

INFERENCEX_FRAMEWORKS = {
    "sglang": "sglang", "vllm": "vllm", "trt": "trtllm", "atom": "atom", "sglang-disagg": "sglang",
    "atom-disagg": "atom", "dynamo-sglang": "sglang", "dynamo-vllm": "vllm", "dynamo-trt": "trtllm",
    "llmd-vllm": "vllm", "tilert": None,
}
"""The frameworks InferenceX uses (research/inferencex-core-spec.md §1.1) and the engine each runs."""


def test_every_framework_of_the_amd_master_resolves_to_its_images_engine(shared_dir: Path) -> None:
    master = yaml.safe_load((shared_dir / "reference" / "inferencex" / "amd-master.yaml").read_text())
    frameworks = {entry["framework"]: parse_image(entry["image"]).engine for entry in master.values()}
    assert {"sglang", "vllm", "atom", "sglang-disagg", "atom-disagg"} <= set(frameworks)
    for framework, image_engine in frameworks.items():
        assert engine_name(framework) == canonical_engine(framework) == image_engine, framework


@pytest.mark.parametrize(("framework", "engine"), INFERENCEX_FRAMEWORKS.items())
def test_inferencex_frameworks_resolve_or_are_refused_with_a_reason(framework: str, engine: str | None) -> None:
    assert engine_name(framework) == engine
    if engine is None:
        assert "no adapter" in unresolved_reason(framework)
        with pytest.raises(ConfigError):
            canonical_engine(framework)
    else:
        assert canonical_engine(framework) == engine


@pytest.mark.parametrize("framework", ["dynamo-atom", "trt-disagg", "dynamo-sim", "mystery"])
def test_wrappers_no_engine_runs_behind_are_refused_by_spec_and_catalog_alike(framework: str) -> None:
    assert engine_name(framework) is None
    assert "maps to no engine adapter" in unresolved_reason(framework)
    with pytest.raises(ConfigError):
        canonical_engine(framework)


def test_no_spelling_names_two_engines() -> None:
    counts = Counter(name for e in ENGINE_IDS.values() for name in e.names)
    assert [name for name, n in counts.items() if n > 1] == []
    for e in ENGINE_IDS.values():
        assert all(engine_for(name) == e.id for name in e.names)
        assert engine_for(e.id.upper()) == e.id  # case does not matter


def test_every_identity_has_one_adapter_one_catalog_entry_and_a_type() -> None:
    assert tuple(engines.ADAPTERS) == tuple(ENGINE_IDS) == get_args(EngineId)
    for eid, adapter in engines.ADAPTERS.items():
        assert adapter.identity is ENGINE_IDS[eid] and adapter.name == eid
        info = get_engine(eid)
        assert info.frameworks == list(ENGINE_IDS[eid].names)
        assert info.metric_prefix == ENGINE_IDS[eid].metric_prefix


def test_each_engine_refuses_every_other_engines_environment_and_none_of_its_own() -> None:
    real = [e for e in ENGINE_IDS.values() if not e.simulated]
    for e in real:
        foreign = engines.get_adapter(e.id).foreign_env_prefixes
        others = {p for o in real if o is not e for p in o.env_prefixes}
        assert set(foreign) == others and not set(foreign) & set(e.env_prefixes), e.id
    assert engines.get_adapter("sim").foreign_env_prefixes == ()


def test_server_metric_readers_belong_to_engines_with_a_prefix() -> None:
    assert [(name, prefix) for name, prefix, _ in server.ADAPTERS] == [
        ("sglang", "sglang:"), ("vllm", "vllm:"), ("trtllm", "trtllm_"), ("atom", "atom:")]
    for name in server.READERS:
        assert ENGINE_IDS[name].metric_prefix, name


def _pinned_recipe(engine: EngineIdentity) -> str:
    return (
        "k:\n  image: lmsysorg/sglang:v0.5.16-cu129\n  model: MiniMaxAI/MiniMax-M3\n  model-prefix: minimaxm3\n"
        f"  runner: cluster:h200-cw\n  precision: fp8\n  framework: {engine.frameworks[0]}\n  multinode: false\n"
        "  scenarios:\n    agentic-coding:\n    - dram-utilization: 0.8\n      search-space:\n"
        "      - { tp: 8, spec-decoding: mtp, kv-offloading: none, conc-list: [8] }\n"
        f"  serve:\n    engine: {{ name: {engine.id} }}\n"
        "    spec-decoding: { method: eagle3, num-steps: 3, draft-model: Inferact/MiniMax-M3-EAGLE3-GQA }\n"
    )


@pytest.mark.parametrize("eid", [e.id for e in ENGINE_IDS.values() if e.pin_acceptance is not None])
def test_each_adapter_renders_its_identitys_acceptance_spelling(plan: Plan, eid: str) -> None:
    identity = ENGINE_IDS[eid]
    job = plan(_pinned_recipe(identity))[0]
    assert job.engine == eid and job.acceptance is not None
    spec = engines.render(job, simulate=identity.simulated)
    assert identity.pin_acceptance is not None
    pin = identity.pin_acceptance(job.acceptance.value, 3)
    assert pin.env or pin.args or pin.speculative_config
    for name, value in pin.env:
        assert spec.env[name] == value
    for flag, value in pin.args:
        i = spec.argv.index(flag)
        assert spec.argv[i + 1] == value
    if pin.speculative_config:
        config = json.loads(spec.argv[spec.argv.index("--speculative-config") + 1])
        assert {k: config[k] for k, _ in pin.speculative_config} == dict(pin.speculative_config)
    if not identity.simulated:
        assert engine_ids.acceptance_spellings(job.acceptance.value, 3)[eid] == pin.describe()


def test_adding_an_engine_is_one_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new identity is seen by spec resolution, the catalog, image parsing, every adapter's foreign-env check and
    `llmsweep al`, with nothing else edited."""
    new = replace(engine_ids.ATOM, id="newengine", frameworks=("newengine", "dynamo-newengine"), aliases=("ne",),
                  env_prefixes=("NEWENGINE_",), image_patterns=(r"(^|/)newengine$",), image_version_patterns=())
    monkeypatch.setitem(ENGINE_IDS, "newengine", new)
    assert engine_name("dynamo-newengine") == canonical_engine("NE") == "newengine"
    assert parse_image("acme/newengine:v1.2.3").engine == "newengine"
    assert "NEWENGINE_" in engines.get_adapter("sglang").foreign_env_prefixes
    assert "newengine" in engine_ids.acceptance_spellings(3.0, 3)
    assert "newengine" not in {e.id for e in all_engines()}  # endpoint facts are catalog data: engines.yaml
