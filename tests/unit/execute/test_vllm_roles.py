"""vLLM's disaggregated roles on one host (`--executor local`): each worker gets its own GPU and its own free NIXL
side-channel port, the router's worker URLs follow the ports the placement moved the workers to, and what each
worker runs as is read back from its start-up log (vLLM's `/version` says only its version); a worker whose log says
another role, connector or TP than planned fails the job. After the window, the decode workers' prompt tokens must
have arrived by KV transfer (`execute.readback.kv_transfer_check`)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.loopback import json_doc, serving

from llmsweep import engines
from llmsweep.engines.launch import Topology
from llmsweep.engines.vllm import NIXL_PORT_ENV, VLLMAdapter
from llmsweep.errors import LaunchError
from llmsweep.execute.local import LocalLauncher
from llmsweep.execute.readback import ReadbackSettings, kv_transfer_check
from llmsweep.execute.roles import GPU_PARTITION_ENV, LocalPlacement, RoleDeployment
from llmsweep.metrics.model import DeploymentBlock, RoleBlock, RoleMetrics, Summary
from llmsweep.plan import Job, jobs_from_files

REPO = Path(__file__).resolve().parents[3]
RECIPE = REPO / "examples" / "gpu" / "llama-1b-bf16-h200x2-vllm-1p1d.yaml"
FLEET = REPO / "examples" / "gpu" / "fleet.yaml"
DATA = REPO / "tests" / "data"


def producer_log(role: str = "kv_producer", connector: str = "NixlConnector", tp: int = 1) -> str:
    """vLLM 0.26.0's start-up lines as its loggers write them (`api_utils.py`, `core.py`, `factory.py`)."""
    config = (f"KVTransferConfig(kv_connector='{connector}', engine_id='e-1', kv_buffer_device='cuda', "
              f"kv_role='{role}', kv_rank=None, kv_connector_extra_config={{}})")
    extra = f"'tensor_parallel_size': {tp}, " if tp != 1 else ""
    return (f"(APIServer pid=1) INFO 12-05 11:00:00 [api_utils.py:273] non-default args: {{'model_tag': '/m', "
            f"'port': 8100, {extra}'kv_transfer_config': {config}}}\n"
            f"(EngineCore pid=2) INFO 12-05 11:00:05 [core.py:117] Initializing a V1 LLM engine (v0.26.0) with "
            f"config: model='/m', tensor_parallel_size={tp}, pipeline_parallel_size=1, data_parallel_size=1, "
            "decode_context_parallel_size=1\n"
            f"(EngineCore pid=2) INFO 12-05 11:00:09 [factory.py:62] Creating v1 connector with name: {connector} and "
            "engine_id: e-1\n")


@pytest.fixture
def job() -> Job:
    (j,) = jobs_from_files([RECIPE], runner_config=FLEET)
    return j


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This host's environment with the CPU rehearsal's `nvidia-smi` listing 2 GPUs (the two-GPU H200 kind)."""
    monkeypatch.setenv("PATH", f"{REPO / 'scripts' / 'gpu' / 'cpu_rehearsal'}:{os.environ.get('PATH', '')}")
    monkeypatch.setenv("LLMSWEEP_STANDIN_GPUS", "2")
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    return dict(os.environ)


def test_each_worker_gets_its_gpu_and_a_free_side_channel_port_and_the_router_follows_their_ports(
        job: Job, two_gpus: dict[str, str], tmp_path: Path) -> None:
    """The workers' planned ports (8100 on node 0 and on node 1: one host here) move to free loopback ports; the
    router names its workers by URL, so its argv follows them (the toy proxy's split `--prefiller-ports 8100` was
    not rewritten and kept pointing at 8100). The planned side-channel ports (5600, 5608) move to free ones too."""
    topology = engines.render_topology(job)
    planned = [int(w.spec.env[NIXL_PORT_ENV]) for r in topology.roles[:2] for w in r.workers]
    assert planned == [5600, 5608]
    with socket.socket() as taken:  # a side-channel port taken on this host is never handed out
        taken.bind(("", 0))
        placement = LocalPlacement(topology, LocalLauncher(), tmp_path, environ=two_gpus)
        specs = {r.kind: placement.place(r, r.workers[0]) for r in topology.roles}
        side = [int(specs[k].env[NIXL_PORT_ENV]) for k in ("prefill", "decode")]
        assert taken.getsockname()[1] not in side
    assert [specs[k].env[GPU_PARTITION_ENV] for k in ("prefill", "decode")] == ["0", "1"]
    assert len(set(side)) == 2 and not set(side) & {5600, 5608}
    assert [specs[k].env["VLLM_NIXL_SIDE_CHANNEL_HOST"] for k in ("prefill", "decode")] == ["127.0.0.1"] * 2
    for port in side:  # free when placed: each binds
        with socket.socket() as sock:
            sock.bind(("", port))
    ports = {specs[k].port for k in ("prefill", "decode")}
    assert len(ports) == 2 and 8100 not in ports
    router = specs["router"].argv
    urls = [router[i + 1] for i, a in enumerate(router) if a in ("--prefill", "--decode")]
    assert urls == [specs["prefill"].base_url, specs["decode"].base_url]
    assert router[router.index("--port") + 1] == str(specs["router"].port) != "8000"


def test_a_real_worker_wider_than_a_node_is_refused_on_one_host(job: Job, two_gpus: dict[str, str],
                                                                tmp_path: Path) -> None:
    topology = engines.render_topology(job, gpus_per_node=1)
    wide = topology.model_copy(update={"roles": tuple(
        r.model_copy(update={"workers": tuple(w.model_copy(update={"nodes": (0, 1)}) for w in r.workers)})
        if r.kind == "decode" else r for r in topology.roles)})
    with pytest.raises(LaunchError, match=r"decode worker 0 of job .* spans several nodes"):
        LocalPlacement(wide, LocalLauncher(), tmp_path, environ=two_gpus)


@pytest.mark.parametrize(("log", "expected"), [
    (producer_log(), {"role": "prefill", "kv_transfer": "nixl", "tp": 1, "engine_id": "e-1",
                      "connector": "NixlConnector", "kv_role": "kv_producer"}),
    (producer_log("kv_consumer", tp=2), {"role": "decode", "kv_transfer": "nixl", "tp": 2}),
    (producer_log("kv_both"), {"kv_role": "kv_both", "kv_transfer": "nixl"}),
    (producer_log(connector="MooncakeConnector"), {"role": "prefill", "kv_transfer": "mooncake"}),
])
def test_vllm_says_what_a_worker_runs_as_in_its_start_up_log(log: str, expected: dict[str, object]) -> None:
    report = VLLMAdapter().role_report({"version": "0.26.0"}, log)
    assert report["version"] == "0.26.0"
    assert {k: report.get(k) for k in expected} == expected
    if expected.get("kv_role") == "kv_both":
        assert "role" not in report  # kv_both names no role: the read-back refuses to guess one


def test_without_the_engine_line_tp_comes_from_the_non_default_args() -> None:
    """The non-default args leave out a size at its default (1); with the engine line missing, they still tell."""
    log = producer_log(tp=4).splitlines()
    report = VLLMAdapter().role_report({}, "\n".join(line for line in log if "Initializing" not in line))
    assert report["tp"] == 4
    assert "tp" not in VLLMAdapter().role_report({}, "")  # nothing in the log: nothing said


@pytest.fixture
def version_server() -> Iterator[str]:
    """A worker's `/version` as vLLM serves it: only the version."""
    with serving(json_doc({"version": "0.26.0"})) as url:
        yield url


def _deployment(topology: Topology, url: str, tmp_path: Path, logs: dict[str, str],
                environ: dict[str, str]) -> RoleDeployment:
    deployment = RoleDeployment.__new__(RoleDeployment)
    deployment.topology = topology
    deployment.placement = LocalPlacement(topology, LocalLauncher(), tmp_path, environ=environ)
    started = []
    for role in topology.roles[:2]:
        path = tmp_path / f"{role.kind}.log"
        path.write_text(logs[role.kind])
        started.append((role, role.workers[0], SimpleNamespace(base_url=url, log_path=path)))
    deployment.started = started  # type: ignore[assignment]
    return deployment


def test_the_read_back_names_each_worker_from_its_log_and_fails_one_that_ran_otherwise(
        job: Job, two_gpus: dict[str, str], version_server: str, tmp_path: Path) -> None:
    topology = engines.render_topology(job)
    good = {"prefill": producer_log(), "decode": producer_log("kv_consumer")}
    ran = _deployment(topology, version_server, tmp_path, good, two_gpus).readback()
    said = ran.describe()
    assert said["engine"] == "vllm" and said["kv_transfer"] == "nixl"
    placed = {k: said["roles"][k]["placed"][0] for k in ("prefill", "decode")}
    assert (placed["prefill"]["kv_role"], placed["decode"]["kv_role"]) == ("kv_producer", "kv_consumer")
    assert placed["decode"]["connector"] == "NixlConnector" and placed["decode"]["version"] == "0.26.0"
    assert said["roles"]["decode"]["tp"] == 1
    for logs, reason in (
            ({**good, "decode": producer_log("kv_producer")}, "says it serves as prefill"),
            ({**good, "prefill": producer_log("kv_both")}, "did not say which KV role it runs as"),
            ({**good, "decode": producer_log("kv_consumer", connector="MooncakeConnector")},
             "says its KV connector is MooncakeConnector; the job moves KV over nixl"),
            ({**good, "prefill": producer_log(tp=2)}, r"says it runs on 2 GPUs; the topology plans 1"),
            ({**good, "decode": "nothing logged yet\n"}, "did not say which KV role")):
        with pytest.raises(LaunchError, match=reason):
            _deployment(topology, version_server, tmp_path, logs, two_gpus).readback()


def _summary(engine: str | None, decode: RoleMetrics | None, router: RoleMetrics | None = None) -> Summary:
    roles = {"prefill": RoleBlock(kind="prefill")}
    if decode is not None:
        roles["decode"] = RoleBlock(kind="decode", metrics=decode)
    if router is not None:
        roles["router"] = RoleBlock(kind="router", metrics=router)
    return Summary(deployment=DeploymentBlock(engine=engine, kv_transfer="nixl"), roles=roles)


@pytest.mark.parametrize(("decode", "router", "ok", "reason"), [
    (RoleMetrics(prompt_tokens=10240, prompt_tokens_transferred=10230, prompt_tokens_computed=10,
                 kv_failed_transfers=0), RoleMetrics(refused_no_kv=0), True, "10230 of the decode workers' 10240"),
    (RoleMetrics(prompt_tokens=10240, prompt_tokens_transferred=0, prompt_tokens_computed=10240), None, False,
     r"decode recomputed the prompt: 0 of its 10240 prompt tokens \(0.0%\) arrived by KV transfer"),
    (RoleMetrics(prompt_tokens=10240, prompt_tokens_transferred=10230, kv_failed_transfers=2), None, False,
     "2 KV transfers failed"),
    (RoleMetrics(prompt_tokens=10240, prompt_tokens_transferred=9216), RoleMetrics(refused_no_kv=1), False,
     "the router refused 1 prefill answer"),
    (RoleMetrics(prompt_tokens=10240), None, False, "give no prompt tokens by source"),
    (None, None, False, "give no prompt tokens by source"),
    (RoleMetrics(prompt_tokens=0, prompt_tokens_transferred=0), None, None, "took in no prompt tokens"),
    # every prefill answer refused: the decode worker saw nothing, and the router's count says why
    (RoleMetrics(prompt_tokens=0, prompt_tokens_transferred=0), RoleMetrics(refused_no_kv=4), False,
     "the router refused 4 prefill answer"),
])
def test_the_kv_transfer_check_judges_the_decode_workers_window(decode: RoleMetrics | None,
                                                                router: RoleMetrics | None, ok: bool | None,
                                                                reason: str) -> None:
    import re

    check = kv_transfer_check(_summary("vllm", decode, router), ReadbackSettings())
    assert check is not None and check.ok is ok and re.search(reason, check.reason or ""), check


def test_the_kv_transfer_check_is_a_real_engines_deployment_only() -> None:
    empty = RoleMetrics(prompt_tokens=100, prompt_tokens_transferred=0)
    assert kv_transfer_check(_summary("sim", empty), ReadbackSettings()) is None
    assert kv_transfer_check(_summary(None, empty), ReadbackSettings()) is None
    assert kv_transfer_check(Summary(), ReadbackSettings()) is None


def test_validate_warns_only_for_the_real_disaggregated_roles_run_refuses(tmp_path: Path) -> None:
    """`launch.disagg-real-engine` said at validate that `run` refuses every real engine's roles; vLLM's with NIXL now
    run (under --executor local): no warning for them, and the rule's warning, with the refusal's own reason, for
    vLLM's roles over a transfer llmsweep does not read back."""
    from llmsweep.policy import validate_files

    def rule_hits(path: Path) -> list[str]:
        return [f.message for f in validate_files([path], runner_config=FLEET).findings
                if f.rule == "launch.disagg-real-engine"]

    assert rule_hits(RECIPE) == []
    mooncake = tmp_path / "mooncake.yaml"
    mooncake.write_text(RECIPE.read_text().replace("kv-p2p-transfer: nixl", "kv-p2p-transfer: mooncake"))
    (said,) = rule_hits(mooncake)
    assert "launched only with KV over nixl" in said


@pytest.mark.parametrize(("role", "kv_role"), [("prefill", "kv_producer"), ("decode", "kv_consumer")])
def test_a_real_vllm_0_26_workers_start_up_lines_say_its_role_connector_and_tp(role: str, kv_role: str) -> None:
    """The lines a real vLLM 0.26.0 worker printed (H100, nixl 1.5.1, 2026-12-05): prefixed by its process
    (`(APIServer pid=N)`, `(EngineCore pid=N)`), configured `NixlConnector` but logged as `NixlPullConnector`, which
    the stand-in did not say and the read-back took for another transfer than nixl."""
    log = (DATA / "vllm" / f"pd-0.26.0-{role}.log").read_text(encoding="utf-8")
    report = VLLMAdapter().role_report({"version": "0.26.0"}, log)
    assert {k: report.get(k) for k in ("role", "kv_role", "kv_transfer", "connector", "tp")} == {
        "role": role, "kv_role": kv_role, "kv_transfer": "nixl", "connector": "NixlPullConnector", "tp": 1}
    assert report["engine_id"] and report["parallel"] == {
        "tensor_parallel_size": 1, "pipeline_parallel_size": 1, "data_parallel_size": 1}


def _pinned(topology: Topology, selection: dict[str, str], kind: str | None = None) -> Topology:
    """`topology` with `selection` in its GPU workers' launch env (of role `kind` only, when given), as a recipe's
    `serve.env` puts it there."""
    return topology.model_copy(update={"roles": tuple(
        r.model_copy(update={"workers": tuple(w.model_copy(update={"spec": w.spec.model_copy(update={
            "env": {**w.spec.env, **selection}})}) for w in r.workers)})
        if r.kind != "router" and kind in (None, r.kind) else r for r in topology.roles)})


BUSY = "GPU-00000000-0000-0000-0000-{:012d}, {}, 70000, /usr/bin/python3"
"""A `--query-compute-apps` row of the rehearsal `nvidia-smi`: GPU N's UUID, a pid."""


def busy(monkeypatch: pytest.MonkeyPatch, *rows: str) -> None:
    """The rehearsal `nvidia-smi` lists `rows` as the processes computing on the GPUs (the tool runs in this
    process's environment)."""
    monkeypatch.setenv("LLMSWEEP_STANDIN_COMPUTE_APPS", "\n".join(rows))


def test_each_worker_is_refused_a_gpu_another_process_computes_on_before_any_starts(
        job: Job, two_gpus: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The placement preflights every worker's share as an aggregated server's GPUs (`preflight.check_gpus`): a GPU
    another process computes on refuses the worker given it, naming it, its GPU and the pid; the fix says how the
    deployment's GPUs are chosen (the shell's selection, shared out in launch order). The MPS daemon is no tenant."""
    topology = engines.render_topology(job)
    busy(monkeypatch, BUSY.format(0, 4242))
    with pytest.raises(LaunchError) as err:
        LocalPlacement(topology, LocalLauncher(), tmp_path, environ=two_gpus)
    assert err.value.message.startswith("prefill worker 0 (CUDA_VISIBLE_DEVICES=0): the vllm server would use GPU "
                                        "0, but another process computes on it") and "decode" not in err.value.message
    assert "pid 4242 (/usr/bin/python3, 70000 MiB)" in err.value.message
    assert err.value.fix == ("stop or wait for pid 4242 (`nvidia-smi` shows what runs where), or give the "
                             "deployment free GPUs with CUDA_VISIBLE_DEVICES (its workers get consecutive GPUs of it, "
                             "in launch order: prefill workers first)")
    # the shell's selection reorders the shares: GPU 0 is now the decode worker's
    with pytest.raises(LaunchError, match=r"^decode worker 0 \(CUDA_VISIBLE_DEVICES=0\)") as err:
        LocalPlacement(topology, LocalLauncher(), tmp_path, environ={**two_gpus, "CUDA_VISIBLE_DEVICES": "1,0"})
    assert "in this shell's CUDA_VISIBLE_DEVICES=1,0" in (err.value.fix or "")
    busy(monkeypatch, BUSY.format(0, 77).replace("/usr/bin/python3", "nvidia-cuda-mps-server"))
    placement = LocalPlacement(topology, LocalLauncher(), tmp_path, environ=two_gpus)
    assert placement.gpus == {("prefill", 0): "0", ("decode", 0): "1", ("router", 0): None}


def test_the_simulators_workers_are_not_preflighted_for_gpus(job: Job, two_gpus: dict[str, str], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """As an aggregated simulator's server: the live simulator's workers use no GPU, busy or not."""
    topology = engines.render_topology(job, simulate=True)
    busy(monkeypatch, BUSY.format(0, 4242), BUSY.format(1, 4243))
    placement = LocalPlacement(topology, LocalLauncher(), tmp_path, environ=two_gpus)
    assert set(placement.gpus.values()) == {None}


def test_the_workers_share_the_gpus_the_recipes_selection_names(job: Job, two_gpus: dict[str, str], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers run with the recipe's `serve.env` over the shell's, as an aggregated server does: their shares are
    taken from the recipe's CUDA_VISIBLE_DEVICES (it was overwritten by shares of the shell's GPUs), a refusal's fix
    names it, and workers whose launches set different selections are refused (no one selection to share out)."""
    topology = _pinned(engines.render_topology(job), {"CUDA_VISIBLE_DEVICES": "1,0"})
    placement = LocalPlacement(topology, LocalLauncher(), tmp_path, environ={**two_gpus, "CUDA_VISIBLE_DEVICES": "0"})
    specs = {r.kind: placement.place(r, r.workers[0]) for r in topology.roles}
    assert (specs["prefill"].env[GPU_PARTITION_ENV], specs["decode"].env[GPU_PARTITION_ENV]) == ("1", "0")
    busy(monkeypatch, BUSY.format(1, 4242))
    with pytest.raises(LaunchError, match=r"^prefill worker 0 \(CUDA_VISIBLE_DEVICES=1\).*pid 4242") as err:
        LocalPlacement(topology, LocalLauncher(), tmp_path, environ=two_gpus)
    assert "in the recipe's `serve.env` CUDA_VISIBLE_DEVICES=1,0" in (err.value.fix or "")
    with pytest.raises(LaunchError, match=r"need 2 GPUs together .* but nvidia-smi shows 1 under the recipe's "
                                          r"CUDA_VISIBLE_DEVICES=1") as err:
        LocalPlacement(_pinned(topology, {"CUDA_VISIBLE_DEVICES": "1"}), LocalLauncher(), tmp_path, environ=two_gpus)
    assert "name 2 GPUs in the recipe's `serve.env` CUDA_VISIBLE_DEVICES=1" in (err.value.fix or "")
    with pytest.raises(LaunchError, match="set different GPU selections in their launch env"):
        LocalPlacement(_pinned(topology, {"CUDA_VISIBLE_DEVICES": "0"}, "decode"), LocalLauncher(), tmp_path,
                       environ=two_gpus)
