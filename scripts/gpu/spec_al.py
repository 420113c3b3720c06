#!/usr/bin/env python3
"""Realised acceptance length between two scrapes of vLLM's /metrics: 1 + Δaccepted / Δdrafts.

The number a golden-AL run must reproduce (docs/gpu.md): vLLM's synthetic rejection sampler is pinned to an AL, and
this reads back what the engine actually did over the measured window only.
usage: spec_al.py BEFORE.txt AFTER.txt
"""

from __future__ import annotations

import json
import sys

from prometheus_client.parser import text_string_to_metric_families

ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
DRAFTS = "vllm:spec_decode_num_drafts"


def totals(path: str) -> dict[str, float]:
    sums: dict[str, float] = {}
    with open(path) as f:
        for family in text_string_to_metric_families(f.read()):
            for sample in family.samples:
                if sample.name in (ACCEPTED + "_total", DRAFTS + "_total"):
                    sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    return sums


def main() -> int:
    before, after = totals(sys.argv[1]), totals(sys.argv[2])
    accepted = after.get(ACCEPTED + "_total", 0.0) - before.get(ACCEPTED + "_total", 0.0)
    drafts = after.get(DRAFTS + "_total", 0.0) - before.get(DRAFTS + "_total", 0.0)
    al = 1 + accepted / drafts if drafts else None
    print(json.dumps({"realised_acceptance_length": al, "accepted_tokens": accepted, "drafts": drafts}))
    return 0 if al is not None else 1


if __name__ == "__main__":
    sys.exit(main())
