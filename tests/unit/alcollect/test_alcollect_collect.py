"""`llmsweep al collect` on the seed recipe's SGLang MTP job (spelled `method: eagle`, SGLang's name for native MTP):
the curve is named so that it reads back as the model's MTP curve."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.alcollect.collect import collection_job, curve_file_name
from llmsweep.catalog.golden import CurveHeader, format_curve, load_curve
from llmsweep.plan import Job, jobs_from_files

REPO = Path(__file__).resolve().parents[3]
SEED = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
HICACHE_ARM = ("      - { tp: 8, spec-decoding: mtp, kv-offloading: dram, kv-offload-backend: { name: hicache }, "
               "conc-list: [4, 8, 12, 16] }\n")


@pytest.fixture
def seed_one_job(tmp_path: Path) -> Path:
    """The seed recipe less its HiCache arm, at concurrency 1: one server for the collection to relaunch per cell."""
    text = SEED.read_text()
    assert HICACHE_ARM in text
    path = tmp_path / "seed-one-job.yaml"
    path.write_text(text.replace(HICACHE_ARM, "").replace("conc-list: [1, 4, 8, 12, 16]", "conc-list: [1]"))
    return path


def _job(recipe: Path) -> Job:
    return collection_job(jobs_from_files([recipe]), simulate=True)


def _header(method: str) -> CurveHeader:
    return CurveHeader(source="test", checkpoint="qwen3.5-397b-a17b-fp8", method=method, precision="fp8 (test)",
                       hardware="simulated mi300x", engine="sim", dataset="coding (test, 2 prompts)",
                       sampling={"temperature": 1.0}, output_len=64, chat_template_kwargs={}, generator="test")


def test_sglang_eagle_spelling_names_a_file_that_reads_back_as_the_mtp_curve(seed_one_job: Path,
                                                                               tmp_path: Path) -> None:
    job = _job(seed_one_job)
    assert job.serve is not None and job.serve.spec_decoding is not None
    assert job.serve.spec_decoding.method == "eagle"  # the seed recipe's spelling
    path = tmp_path / "golden" / curve_file_name(job)
    path.parent.mkdir()
    path.write_text(format_curve(_header("eagle"), {"thinking_on": {3: 3.2}}))
    curve = load_curve(path)
    assert (curve.model_prefix, curve.method) == ("qwen3.5", "mtp")
