"""Stand-in for `python3 -m vllm.entrypoints.openai.api_server`: parses the flags llmsweep's scripts and vLLM
adapter render, the way vLLM 0.26.0 does (the last of `--speculative-config`/`-sc` wins), and execs llmsweep's
simulator in vLLM style instead, so a GPU script walks its real path on a CPU: launch, readiness on /health,
the served name, vLLM metric names, the acceptance read-back.

With `--kv-transfer-config` naming NixlConnector (a disaggregated worker) it is a NIXL worker's stand-in instead
(:mod:`vllm.entrypoints.openai.nixl_standin`): the simulator behind a front that speaks vLLM's P/D protocol."""

from __future__ import annotations

import json
import os
import sys


def sim_argv(argv: list[str]) -> list[str]:
    """The `llmsweep sim serve` command line for a vLLM api_server command line."""
    opts: dict[str, str | bool] = {}
    i = 0
    while i < len(argv):
        flag = argv[i]
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            opts["--speculative-config" if flag == "-sc" else flag] = argv[i + 1]
            i += 2
        else:
            opts[flag] = True
            i += 1
    model = str(opts.get("--model", "model"))
    sim = [sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", "--model", _figures(model),
           "--served-model-name", str(opts.get("--served-model-name", model)), "--hardware", "h200",
           "--tp", str(opts.get("--tensor-parallel-size", 1)), "--host", str(opts.get("--host", "127.0.0.1")),
           "--port", str(opts.get("--port", 8000)), "--precision", "bf16", "--engine-style", "vllm"]
    if "--max-num-seqs" in opts:
        sim += ["--max-running-requests", str(opts["--max-num-seqs"])]
    spec = opts.get("--speculative-config")
    if isinstance(spec, str):
        doc = json.loads(spec)
        method = doc["method"] if doc["method"] in ("draft_model", "ngram") else "mtp"
        k = int(doc["num_speculative_tokens"])
        sim += ["--spec-method", method, "--spec-k", str(k)]
        if doc.get("synthetic_acceptance_length") is not None:
            sim += ["--acceptance-length", str(doc["synthetic_acceptance_length"])]
        else:  # real verification: the simulator drafts nothing, so it realises the method's typical acceptance
            from llmsweep.engines.sim import ESTIMATED_DRAFT_ACCEPTANCE
            from llmsweep.sim.acceptance import expected_length

            sim += ["--acceptance-length", f"{expected_length(ESTIMATED_DRAFT_ACCEPTANCE[method], k):.3f}"]
    return sim


def _figures(model: str) -> str:
    """The model whose figures the simulator uses: the served directory's name when the catalog knows it (a
    synthesised `qwen3-next-small` prices as that shape), else the 1.1B Llama."""
    try:
        from llmsweep.catalog.models import find_model
    except ImportError:  # llmsweep not importable here: the exec'd simulator will say so
        return "llama-1b"
    name = os.path.basename(model.rstrip("/"))
    return name if find_model(name) is not None else "llama-1b"


def main(argv: list[str]) -> None:
    if "--kv-transfer-config" in argv:
        from vllm.entrypoints.openai import nixl_standin

        nixl_standin.main(argv, sim_argv(nixl_standin.behind(argv)))
        return
    sim = sim_argv(argv)
    print("vllm stand-in:", " ".join(sim), flush=True)
    os.execv(sys.executable, sim)


if __name__ == "__main__":
    main(sys.argv[1:])
