"""`llmsweep render --job` of a multinode, disaggregated job prints every role (prefill and decode workers with
their own parallelism and nodes, the router), `--format json` the topology; `--format sh` refuses (one script runs
on one host); a framework llmsweep cannot launch disaggregated is refused with the reason."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from llmsweep.plan import jobs_from_files

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "tests" / "data" / "recipes" / "disagg" / "multinode.yaml"


def render(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "render", str(RECIPE), *args],
                          capture_output=True, text=True, cwd=REPO)


def job_id(framework: str) -> str:
    return next(j.id for j in jobs_from_files([RECIPE]) if j.framework == framework)


def test_text_lists_every_role_with_its_nodes_and_launch() -> None:
    out = render("--job", job_id("sglang-disagg"))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "# topology: 3 nodes of 8 GPUs, 24 GPUs in use, KV transfer mori" in text
    assert "# role prefill: 1 worker × 8 GPUs, 1 node each" in text
    assert "# role decode: 2 workers × 8 GPUs, 1 node each" in text
    for head in ("# ---- prefill 0 on node 0", "# ---- decode 0 on node 1", "# ---- decode 1 on node 2",
                 "# ---- router 0 on node 0"):
        assert head in text
    blocks = text.split("# ---- ")[1:]
    assert len(blocks) == 4
    assert "--disaggregation-mode prefill" in blocks[0] and "--enable-dp-attention" in blocks[0]
    assert "PREFILL_NODES=1" in blocks[0]
    assert all("--disaggregation-mode decode" in b and "--enable-dp-attention" not in b for b in blocks[1:3])
    assert "sglang_router.launch_router" in blocks[3] and "--pd-disaggregation" in blocks[3]


def test_json_is_the_topology() -> None:
    out = render("--job", job_id("sglang-disagg"), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    topo = doc["topology"]
    assert doc["job"] == topo["job"] and topo["disaggregated"] is True and topo["nodes"] == 3
    roles = {r["kind"]: r for r in topo["roles"]}
    assert set(roles) == {"prefill", "decode", "router"}
    assert sum(r["count"] * r["gpus_per_worker"] for r in topo["roles"]) == topo["gpus"] == 24
    assert [r["gpus"] for r in topo["roles"]] == [8, 16, 0]
    assert [w["nodes"] for w in roles["decode"]["workers"]] == [[1], [2]]
    assert roles["prefill"]["workers"][0]["spec"]["argv"][:3] == ["python3", "-m", "sglang.launch_server"]


def test_sh_refuses_a_multinode_job_with_the_reason() -> None:
    out = render("--job", job_id("sglang-disagg"), "--format", "sh")
    assert out.returncode == 2 and out.stdout == ""
    assert "one script runs on one host" in out.stderr and "--format text or --format json" in out.stderr


def test_a_framework_llmsweep_cannot_launch_disaggregated_is_refused() -> None:
    out = render("--job", job_id("atom-disagg"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "cannot render atom's disaggregated prefill/decode launch" in out.stderr


def test_simulate_prints_the_simulators_roles_one_by_one() -> None:
    """`--simulate` renders what the simulator launches for the job: its own prefill and decode workers on their nodes
    (each `sim serve --role` with the worker's parallelism) and its PD router, never a refusal."""
    from llmsweep import engines

    job = next(j for j in jobs_from_files([RECIPE]) if j.framework == "sglang-disagg")
    out = render("--job", job.id, "--simulate")
    assert out.returncode == 0, out.stderr
    blocks = out.stdout.split("# ---- ")[1:]
    assert [b.splitlines()[0] for b in blocks] == ["prefill 0 on node 0", "decode 0 on node 1",
                                                   "decode 1 on node 2", "router 0 on node 0"]
    assert all("# engine: sim" in b for b in blocks)
    assert "sim serve" in blocks[0] and "--role prefill" in blocks[0] and "--ep 8" in blocks[0]
    assert all("--role decode" in b and "--kv-transfer mori" in b for b in blocks[1:3])
    assert "sim router" in blocks[3] and "--decode 'http://{node2}:8000'" in blocks[3]
    as_json = render("--job", job.id, "--simulate", "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    topology = json.loads(as_json.stdout)["topology"]
    assert topology == engines.render_topology(job, simulate=True).model_dump(mode="json")
    assert topology["engine"] == "sim" and topology["gpus"] == 24
