"""The tokenizer preflight (`execute.pipeline._check_inputs`): a tokenizer that does not load refuses its jobs before
any server starts where their client runs on this host; where it runs on the node a batch job is placed on (Slurm),
whose node-local paths and caches this host may not see, it is said and the node loads it."""

from __future__ import annotations

from pathlib import Path

from llmsweep.execute.executor import registered_executors
from llmsweep.execute.pipeline import _check_inputs
from llmsweep.plan import Job, jobs_from_files

FIXED = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"


def _jobs(tmp_path: Path, tokenizer: Path) -> list[Job]:
    """fixed-sim.yaml served by its real engine (SGLang), counting its prompts in `tokenizer`."""
    text = FIXED.read_text().replace("  serve:\n    engine: { name: sim }\n", "")
    text = text.replace("  workload:\n", f"  workload:\n    tokenizer: {tokenizer}\n", 1)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text)
    return jobs_from_files([recipe])


def test_a_tokenizer_missing_here_refuses_where_the_client_runs_here_and_is_said_where_a_node_runs_it(
        tmp_path: Path) -> None:
    import llmsweep.execute.registry  # noqa: F401  (registers every built-in executor)

    executors = registered_executors()
    jobs = _jobs(tmp_path, tmp_path / "only-on-the-nodes")
    said: list[str] = []
    keep, refused = _check_inputs(jobs, said.append, lifecycle_here=executors["local"].lifecycle_here)
    assert not keep and len(refused) == len(jobs) and all(o.status == "refused" for o in refused)
    said.clear()
    keep, refused = _check_inputs(jobs, said.append, lifecycle_here=executors["slurm"].lifecycle_here)
    assert keep == jobs and not refused
    assert len(said) == 1 and said[0].startswith("warning: tokenizer ") and "its jobs' nodes load it" in said[0]
