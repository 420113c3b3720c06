"""`llmsweep run` records in job.json the context length the launch runs with, not the one it would have derived."""

from __future__ import annotations

from pathlib import Path

import yaml
from test_run_support import RECIPES, cli_env, job_dirs, read_json, run_cli


def test_job_json_records_the_recipes_context_flag(tmp_path: Path) -> None:
    """A vLLM recipe pinning `--max-model: 8192` (vLLM's prefix of --max-model-len; pinned so jobs share a server)
    on an isl 256 / osl 64 job: job.json said max-model-len 576 while the command line said 8192."""
    doc = yaml.safe_load((RECIPES / "fixed-sim.yaml").read_text(encoding="utf-8"))
    (recipe,) = doc.values()
    recipe["scenarios"]["fixed-seq-len"][0]["search-space"][0]["conc-list"] = [2]
    recipe["serve"] = {"engine": {"name": "vllm"}, "args": {"--max-model": 8192}}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    out = tmp_path / "out"
    proc = run_cli([path, "--simulate", "--out", out], cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (jdir,) = job_dirs(out).values()
    job = read_json(jdir / "job.json")
    assert job["max-model-len"] == 8192 and job["serve"]["args"] == {"--max-model": 8192}
