"""One-key recipes for tests that read what llmsweep makes of a single job (its launch, its policy findings): one
home for the YAML those tests write, so each says only what differs (engine, image, model, runner, serve block)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llmsweep.plan import Job, jobs_from_files


@dataclass(frozen=True)
class Served:
    """A checkpoint as a recipe names it: its Hugging Face id, InferenceX model-prefix and precision."""

    model: str
    prefix: str
    precision: str


LLAMA_8B = Served("meta-llama/Llama-3.1-8B-Instruct", "llama3.1-8b", "bf16")
LLAMA_70B_FP8 = Served("meta-llama/Llama-3.1-70B-Instruct", "llama3.1-70b", "fp8")
QWEN35_FP8 = Served("Qwen/Qwen3.5-397B-A17B-FP8", "qwen3.5", "fp8")
DSR1_FP8 = Served("deepseek-ai/DeepSeek-R1-0528", "dsr1", "fp8")


def recipe_text(*, framework: str, image: str, served: Served = LLAMA_8B, runner: str = "h200", key: str = "k",
                isl: int = 1024, osl: int = 1024, tp: int = 1, concs: str = "[4]", arm: str = "",
                agentic: bool = False, engine: str | None = None, args: str | None = None,
                workload: str = "") -> str:
    """The YAML of one recipe key with one search-space arm: fixed-seq-len at `isl`/`osl` (or `agentic` coding,
    GPU-resident KV, no speculation), `arm` appended to the arm's flow map (`, spec-decoding: mtp`); a `serve` block
    when `engine` (a flow map's body, `name: sim`) or `args` (a flow map's body; "" an empty one) is given;
    `workload` (lines indented under the key, `  workload:\\n    ...`) as written."""
    if agentic:
        scenario = (f"    agentic-coding:\n    - search-space:\n      - {{ tp: {tp}, conc-list: {concs}, "
                    f"kv-offloading: none, spec-decoding: none{arm} }}\n")
    else:
        scenario = (f"    fixed-seq-len:\n    - isl: {isl}\n      osl: {osl}\n      search-space:\n"
                    f"      - {{ tp: {tp}, conc-list: {concs}{arm} }}\n")
    serve = ""
    if engine is not None or args is not None:
        serve = ("  serve:\n" + (f"    engine: {{ {engine} }}\n" if engine is not None else "")
                 + (f"    args: {{ {args} }}\n" if args is not None else ""))
    return (f"{key}:\n  image: {image}\n  model: {served.model}\n  model-prefix: {served.prefix}\n  runner: {runner}\n"
            f"  precision: {served.precision}\n  framework: {framework}\n  multinode: false\n  scenarios:\n"
            f"{scenario}{serve}{workload}")


def write_recipe(path: Path, **kw: object) -> Path:
    """:func:`recipe_text` written to `path` (its arguments by name)."""
    path.write_text(recipe_text(**kw), encoding="utf-8")  # type: ignore[arg-type]
    return path


def one_job(tmp_path: Path, **kw: object) -> Job:
    """The single job of :func:`recipe_text`'s recipe, written under `tmp_path` (one concurrency: one job)."""
    (job,) = jobs_from_files([write_recipe(tmp_path / "r.yaml", **kw)])
    return job


def flag(argv: tuple[str, ...], name: str) -> str | None:
    """Value of `name` in argv (None when absent; '' for a bare switch)."""
    if name not in argv:
        return None
    i = argv.index(name)
    return argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else ""


def engine_recipe(framework: str, image: str, *, arm: str, serve: str, scenario: str = "agentic", runner: str = "",
           model: str = "MiniMaxAI/MiniMax-M3", prefix: str = "minimaxm3") -> str:
    """One agentic (or `scenario="fixed"` 8k/1k) key of `framework` on `image` with one search-space `arm` (a flow
    map) and `serve` (the serve block's indented body), for tests that read an engine launch or its findings."""
    runner = runner or ("cluster:h200-cw" if scenario == "agentic" else "h200")
    if scenario == "agentic":
        scen = f"    agentic-coding:\n    - dram-utilization: 0.8\n      search-space:\n      - {arm}\n"
    else:
        scen = f"    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n      - {arm}\n"
    return (f"k:\n  image: {image}\n  model: {model}\n  model-prefix: {prefix}\n  runner: {runner}\n"
            f"  precision: fp8\n  framework: {framework}\n  multinode: false\n  scenarios:\n{scen}  serve:\n{serve}")
