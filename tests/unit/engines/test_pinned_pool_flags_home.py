"""vLLM's KV-pool pins have one home (`engines.base.PINNED_POOL_FLAGS`), below every adapter.

The simulator serves both pins as vLLM reads them, and the adapters of engines whose parsers define neither (SGLang,
TensorRT-LLM, ATOM) refuse both, each with its own fix: a flag added to the list is then refused by every one of them
and served by the simulator, where three hand-written copies of the list could drift apart."""

from __future__ import annotations

import pytest

from llmsweep.engines import base, sim
from llmsweep.engines.atom import ATOMAdapter
from llmsweep.engines.base import PINNED_POOL_FLAGS, Adapter
from llmsweep.engines.sglang import SGLangAdapter
from llmsweep.engines.trtllm import TRTLLMAdapter

REFUSING: dict[type[Adapter], str] = {SGLangAdapter: "SGLang", TRTLLMAdapter: "TensorRT-LLM", ATOMAdapter: "ATOM"}


def test_the_simulator_serves_the_one_list() -> None:
    assert sim.PINNED_POOL_FLAGS is base.PINNED_POOL_FLAGS
    assert set(PINNED_POOL_FLAGS) <= sim.MODELLED
    assert sim.FRACTION_BYPASSING_PIN in PINNED_POOL_FLAGS


@pytest.mark.parametrize("adapter", list(REFUSING))
def test_each_engine_without_the_flags_refuses_every_pin_with_its_own_fix(adapter: type[Adapter]) -> None:
    fixes = {flag: adapter.unsupported_args.get(flag) for flag in PINNED_POOL_FLAGS}
    assert all(fixes.values()), fixes
    (fix,) = set(fixes.values())  # one fix for both pins, naming the engine's own way to size its pool
    assert fix is not None and REFUSING[adapter] in fix and "pins its KV pool" in fix


def test_the_fixes_are_each_engines_own() -> None:
    assert len({adapter.unsupported_args[PINNED_POOL_FLAGS[0]] for adapter in REFUSING}) == len(REFUSING)
