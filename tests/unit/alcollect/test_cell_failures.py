"""A golden-AL cell is measured only when its run stands for the prompt set the curve names: a cell with most of its
requests failed had counted as measured, its AL read from the few that answered (only a header note said so)."""

from __future__ import annotations

from llmsweep.alcollect.collect import unmeasured_reason
from llmsweep.metrics.gates import FIXED_MAX_ERROR_RATIO
from llmsweep.metrics.model import Requests, SpecDecode

SPEC = SpecDecode(acceptance_length=2.4, accepted_tokens=140.0, drafts=100.0, method="1 + d(accepted) / d(drafts)")


def _reason(ok: int, failed: int) -> str | None:
    requests = Requests(total=ok + failed, successful=ok, failed=failed, error_categories={"timeout": failed}
                        if failed else {})
    return unmeasured_reason(requests, SPEC, 100.0, "vllm", 512)


def test_a_cell_most_of_whose_requests_failed_is_not_measured_and_says_why() -> None:
    reason = _reason(1, 23)
    assert reason is not None and reason.startswith("23 of 24 requests failed (23 timeout), more than the 5%")
    assert "collect it again" in reason


def test_a_cell_within_the_error_gate_is_measured() -> None:
    assert FIXED_MAX_ERROR_RATIO == 0.05
    assert _reason(80, 0) is None and _reason(76, 4) is None  # 4 of 80: 5 %, at the gate
    assert _reason(75, 5) is not None  # 5 of 80: over it


def test_what_was_refused_before_still_is() -> None:
    assert (_reason(0, 24) or "").startswith("no request succeeded (24 failed: 24 timeout)")
    nothing = unmeasured_reason(Requests(total=3, successful=3), SpecDecode(), None, "sglang", 512)
    assert (nothing or "").startswith("the server drafted nothing over the run (sglang metrics reader, 3 requests")
