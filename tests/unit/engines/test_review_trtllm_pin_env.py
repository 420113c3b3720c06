"""Review of the render merge: TensorRT-LLM's two-model fractional-pin refusal named the pin's environment variable
in a string of its own (`engines.trtllm.FORCE_ACCEPTED_ENV`) beside the one the pin writes (`engine_ids`): a rename
of one would have let every fractional pin on DraftTarget/NGram through unrefused. One home, imported."""

from __future__ import annotations

from llmsweep import engine_ids
from llmsweep.engines import trtllm


def test_the_refusal_reads_the_variable_the_pin_writes() -> None:
    assert trtllm.FORCE_ACCEPTED_ENV is engine_ids.TLLM_FORCE_ACCEPTED_ENV
    make = engine_ids.ENGINE_IDS["trtllm"].pin_acceptance
    assert make is not None
    assert dict(make(2.5, 3).env).keys() == {trtllm.FORCE_ACCEPTED_ENV}
