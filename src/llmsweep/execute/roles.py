"""A disaggregated job's roles, each launched as a server of its own: `srun` steps on their nodes of one Slurm
allocation, or processes of their own on this host (the local executor).

A placement (:class:`RolePlacement`) says where each worker of a topology (`engines.launch.Topology`) runs, fills in
the node placeholders its launch carries (`{node0}`, `{node1}`, …) and starts it:

- :class:`SlurmPlacement`: the batch job of a multi-node topology holds every node the topology numbers; its worker
  runs on the first node and starts each prefill and decode worker as a step on the worker's node (pyxis/enroot flags
  as for any server step), the placeholders becoming the nodes' addresses (`NodeAddr`). Ctrl-C, `scancel` and
  `--resume` reach the steps through the handle's `stop` (or, for a killed run, the cancellation of the allocation).
- :class:`LocalPlacement`: every worker and the router a process of its own on this host (its own session, torn down
  as a tree, as any local server), each on a free loopback port; the router is pointed at the workers' ports. Each
  process has a pid file of its own beside the group's, so a `--resume` after a killed run stops every one of them.
  A worker that needs GPUs gets its share of the host's through CUDA_VISIBLE_DEVICES, in its launch's env (with
  CUDA_DEVICE_ORDER=PCI_BUS_ID on NVIDIA: the share is nvidia-smi's indices, `preflight.in_bus_order`), only
  when the host shows them all (the simulator needs none), and each share gets an aggregated server's launch
  preflight (`preflight.check_gpus`) before any worker starts.

Either way the workers start first (prefill, then decode), each waited for until it answers its health check, then
the router; the client talks to the router. What ran is read back, never copied from the plan: every role's
`/version` says what it serves as and where (:class:`RanTopology`, stored in each job's provenance); a role that does
not come up, dies, or reports another role fails the job, and every process started so far is torn down.

What each worker did is read from its own `/metrics` (:class:`FederatedMetrics`): one loopback endpoint beside the
lifecycle that, at each of the client's scrapes, reads every worker's metrics and labels each series with the worker's
role and index, as the virtual-time deployment labels its workers' (`sim.disagg.Cluster.scrape_samples`). The client
scrapes it as it scrapes a single server, so `server_metrics.jsonl`, the summary's `server_metrics`, each role's
`metrics` (`metrics.roles`) and the required-metrics gate come out as on every other path.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from llmsweep import shell
from llmsweep.client.scrape import SCRAPE_TIMEOUT_MIN_S, parse_exposition
from llmsweep.direct import DIRECT
from llmsweep.engine_ids import SIM
from llmsweep.engines.launch import NODE_RANK, LaunchSpec, Role, RoleKind, RoleWorker, Topology
from llmsweep.engines.sim import LOOPBACK
from llmsweep.errors import LaunchError
from llmsweep.execute.commands import run_command
from llmsweep.execute.handle import DEFAULT_TAIL_LINES, ProcessServerHandle
from llmsweep.execute.local import LocalLauncher
from llmsweep.execute.node_power import READY_LINE
from llmsweep.execute.preflight import NO_GPU_TOOL, HostGpuQueries, in_bus_order
from llmsweep.execute.pyxis import SrunLauncher, scontrol_show
from llmsweep.execute.ready import server_version, wait_ready
from llmsweep.execute.secrets import SecretScrubber
from llmsweep.execute.signals import shielded
from llmsweep.metrics.roles import ROUTER_ABANDONED, ROUTER_NO_KV, ROUTER_RETRIED
from llmsweep.option_spellings import flag as _flag
from llmsweep.power.deployment import NodePowerFiles, SampledWorker
from llmsweep.power.sampler import OFF_REASON, BackendChoice, PowerSettings
from llmsweep.power.samples import GPU_METRICS_FILE
from llmsweep.visible import CUDA as VISIBLE_CUDA
from llmsweep.visible import VISIBLE_ENV
from llmsweep.words import count_of, noun

_DECODE_URLS = _flag("decode_urls")
_EXECUTOR = _flag("executor")
_JOB = _flag("job")
_PREFILL_URLS = _flag("prefill_urls")
_SIMULATE = _flag("simulate")


log = logging.getLogger(__name__)

_NODE_PLACEHOLDER = re.compile(r"\{node(\d+)\}")
_FIX = "check that slurmctld answers (`sinfo`) and that the job runs inside its allocation"
ROLES_DIR = "roles"
"""Per-role logs, beside the server group's `server.log`."""
POWER_DIR = "power"
"""Under ROLES_DIR: one folder per node with that node's `gpu_metrics.jsonl` (`execute.node_power`)."""
_SAMPLER_START_S = 30.0
COMMANDS_FILE = "commands.txt"
"""Under ROLES_DIR: every role step's command line, as launched."""


@dataclass(frozen=True)
class AllocatedNode:
    """A node of the current allocation: Slurm's name and the address its daemons (and our servers) use."""

    name: str
    address: str


def allocation_nodes(environ: Mapping[str, str] | None = None, timeout_s: float = 30.0) -> list[AllocatedNode]:
    """The allocation's nodes in Slurm's order (`scontrol show hostnames $SLURM_JOB_NODELIST`), each with its
    `NodeAddr` (`scontrol show node`)."""
    env = os.environ if environ is None else environ
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise LaunchError("the roles of a multi-node job start only inside its Slurm allocation "
                          "(SLURM_JOB_NODELIST is not set)", fix="run the job through the slurm executor")
    names = run_command(["scontrol", "show", "hostnames", nodelist], timeout_s=timeout_s, fix=_FIX).stdout.split()
    nodes = []
    for name in names:
        fields = scontrol_show("node", name, timeout_s=timeout_s, fix=_FIX, check=True)
        nodes.append(AllocatedNode(name=name, address=fields.get("NodeAddr") or name))
    return nodes


def place(spec: LaunchSpec, nodes: list[AllocatedNode], node_rank: int = 0) -> LaunchSpec:
    """`spec` with every `{nodeK}` replaced by node K's address and `{node_rank}` by `node_rank`."""

    def sub(text: str) -> str:
        def address(match: re.Match[str]) -> str:
            k = int(match.group(1))
            if k >= len(nodes):
                raise LaunchError(f"the launch names node {k} but the allocation has {count_of(len(nodes), 'node')}",
                                  fix="the batch job must request the topology's node count (`--nodes`)")
            return nodes[k].address

        return _NODE_PLACEHOLDER.sub(address, text).replace(NODE_RANK, str(node_rank))

    return spec.model_copy(update={
        "argv": tuple(sub(a) for a in spec.argv), "env": {k: sub(v) for k, v in spec.env.items()},
        "host": sub(spec.host)})


class RanWorker(BaseModel):
    """One started worker, as it reported itself."""

    model_config = ConfigDict(extra="forbid")

    index: int
    node: str = Field(description="The node Slurm placed the step on.")
    nodes: list[str] = Field(default_factory=list, description="Every node the worker's placement spans, in the "
                             "topology's order, `node` first (a worker wider than a node spans several; on one host, "
                             "that host).")
    reported_node: str | None = Field(default=None, description="The node the server says it runs on (/version).")
    url: str
    gpus: int | None = Field(default=None, description="GPUs the server says it uses (/version `tp`).")
    ep: int | None = Field(default=None, description="Expert-parallel degree the server reports (/version `ep`).")
    max_running_requests: int | None = Field(default=None, description="Most requests it runs at once (/version).")
    dp_attention: int | None = Field(default=None, description="DP-attention ranks it runs (/version `dp_attention`; "
                                     "the simulator reports it, a real engine's worker does not).")
    kv_links: list[dict[str, Any]] = Field(default_factory=list, description="A decode worker: the link its KV "
                                           "arrives over from each prefill worker, as it models it (/version).")
    version: str | None = Field(default=None, description="The engine version the worker reports (/version).")
    simulator_digest: str | None = Field(default=None, description="The simulator build the worker runs, as it "
                                         "reports it (/version `simulator_digest`: `sim.identity.simulator_digest`); "
                                         "None for a real engine's worker.")
    calibration: str | None = Field(default=None, description="The simulator's calibration label for the worker's "
                                    "(engine, hardware, model class), as it reports it (/version `calibration`); None "
                                    "for a real engine's worker.")
    kv_role: str | None = Field(default=None, description="A real engine's worker: the KV role its log says "
                                "(kv_producer, kv_consumer, kv_both).")
    connector: str | None = Field(default=None, description="A real engine's worker: the KV connector its log says "
                                  "it created (NixlConnector).")
    engine_id: str | None = Field(default=None, description="The KV connector's engine id (the worker's log).")


class RanRole(BaseModel):
    """A role that ran: its kind, the GPUs planned per worker, and every worker that came up."""

    model_config = ConfigDict(extra="forbid")

    role: RoleKind
    count: int
    gpus_per_worker: int
    workers: list[RanWorker]


class RanTopology(BaseModel):
    """The topology that ran, read back from the started roles: what a disaggregated result's provenance says."""

    model_config = ConfigDict(extra="forbid")

    disaggregated: bool
    nodes: list[str] = Field(description="The allocation's nodes, in Slurm's order.")
    kv_transfer: str | None = Field(description="The KV-transfer backend the decode workers report (its name, as "
                                    "`sim.disagg.DisaggConfig.transfer_backend`; the links are `kv_links`).")
    gpus_per_node: int | None = Field(default=None, description="The GPUs per node the workers were placed by (the "
                                      "runner's, as the topology plans them); None where every worker ran on one "
                                      "host (the local executor).")
    engine: str | None = Field(default=None, description="The engine the workers run (the topology's adapter).")
    router: dict[str, Any] | None = Field(default=None, description="What the router says it is (/version: "
                                          "`engine`, `protocol`, `version`).")
    router_policy: str | None = Field(default=None, description="How the router picked each request's workers, as "
                                      "its /version says it (`policy`); None where it said nothing: no policy is "
                                      "recorded that the router did not report.")
    gpus: int = Field(description="GPUs of every role together (the job's).")
    roles: list[RanRole]

    @property
    def simulator_digest(self) -> str | None:
        """The simulator build the deployment's engine workers ran (`provenance.simulator.digest` of its results):
        the one every prefill and decode worker reports; None where any reports none (a real engine's). The
        read-back refuses a deployment whose roles report different builds (:meth:`RoleDeployment.readback`)."""
        said = {w.simulator_digest for r in self.roles if r.role != "router" for w in r.workers}
        return next(iter(said)) if len(said) == 1 else None

    @property
    def simulator_calibration(self) -> str | None:
        """The simulator's calibration of the deployment's engine pools, in virtual time's words
        (:func:`pools_calibration`: `prefill: …; decode: …`), each pool's the label every one of its workers
        reports; None where a pool's workers report none or several (a real engine's)."""
        said: list[tuple[str, str]] = []
        for kind in ("prefill", "decode"):
            labels = {w.calibration for r in self.roles if r.role == kind for w in r.workers}
            label = next(iter(labels)) if len(labels) == 1 else None
            if label is None:
                return None
            said.append((kind, label))
        return pools_calibration(said)

    def describe(self) -> dict[str, Any]:
        """The deployment as provenance records it (`provenance.topology`), in the one shape the summary's
        `deployment` and `roles` blocks are read from (`metrics.roles`; the virtual-time deployment writes the same
        through `sim.disagg.DisaggConfig.describe`): roles by kind, node indices into `node_names` (every node of
        each worker's placement, as virtual time's), and each started worker under `placed`."""
        index = {name: i for i, name in enumerate(self.nodes)}
        roles: dict[str, Any] = {}
        for ran in self.roles:
            # the engine's parallelism and batch limit as its workers report them (the virtual deployment's `tp`,
            # `ep`, `dp_attention`, `max_running_requests`): present only where every worker of the role reported
            # the same value; a router runs no engine
            reported = {key: {getattr(w, attr) for w in ran.workers}
                        for key, attr in (("tp", "gpus"), ("ep", "ep"), ("dp_attention", "dp_attention"),
                                          ("max_running_requests", "max_running_requests"))
                        if ran.role != "router"}
            roles[ran.role] = {
                "kind": ran.role, "workers": ran.count, "gpus_per_worker": ran.gpus_per_worker,
                "gpus": ran.count * ran.gpus_per_worker,
                "nodes": sorted({index[n] for w in ran.workers for n in (w.nodes or [w.node]) if n in index}),
                **{key: next(iter(seen)) for key, seen in reported.items() if len(seen) == 1 and None not in seen},
                "placed": [w.model_dump(mode="json") for w in ran.workers],
            }
        # every distinct link some (prefill, decode) pair used, as the decode workers model it (virtual time: the
        # same list from `DisaggConfig.links`, with each link's catalog source)
        links: list[dict[str, Any]] = []
        for ran in self.roles:
            for w in ran.workers:
                links += [link for link in w.kv_links if link not in links]
        return {"disaggregated": self.disaggregated, "nodes": len(self.nodes), "node_names": list(self.nodes),
                "gpus": self.gpus, "gpus_per_node": self.gpus_per_node, "kv_transfer": self.kv_transfer,
                "router_policy": self.router_policy, "links": links,
                **({"engine": self.engine} if self.engine is not None else {}),
                **({"router": self.router} if self.router is not None else {}),
                "roles": roles}


def pools_calibration(pools: list[tuple[str, str]]) -> str:
    """A disaggregated deployment's calibration label, each pool's in turn (`prefill: uncalibrated; decode: ...`):
    what its results record as `provenance.simulator.calibration`, in virtual time (`virtual_disagg`) as live."""
    return "; ".join(f"{kind}: {label}" for kind, label in pools)


ROLE_LABEL, WORKER_LABEL = "role", "worker"
"""The labels a federated scrape adds to each worker's series (the virtual-time deployment's, `sim.disagg`)."""
FETCH_TIMEOUT_S = SCRAPE_TIMEOUT_MIN_S * 3 / 4
"""How long a federated scrape waits for its workers' pages, all of them at once: a quarter less than the least a
client's scrape waits for the federation's answer (`client.scrape.SCRAPE_TIMEOUT_MIN_S`), so that a worker that does
not answer (hung, or stopped: SIGSTOP) is named in the 502 while the client still listens. The two were equal: the
client always hung up first and said only `TimeoutError`, and each answer written after it went was a
`BrokenPipeError` traceback on the run's stderr."""


@dataclass(frozen=True)
class VersionCount:
    """A count of a `/version` document read as a Prometheus counter: `key`'s number, or, with `labels`, a mapping
    nested as deep as the labels (each level's keys the label's values; a sample per number at the bottom)."""

    key: str
    name: str
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class MetricsTarget:
    """One worker whose `/metrics` the federation reads."""

    role: RoleKind
    index: int
    url: str
    counters: tuple[VersionCount, ...] = ()
    """A target without Prometheus metrics (llmsweep's router): `url` is its `/version`, and each count it names
    turns that document's count into counter samples (`<name>_total`)."""


ROUTER_COUNTERS = (VersionCount("refused_no_handle", ROUTER_NO_KV.name),
                   VersionCount("abandoned", ROUTER_ABANDONED.name, ("pool", "url")),
                   VersionCount("retried", ROUTER_RETRIED.name, ("pool", "url")))
"""The counts of llmsweep's PD router's `/version` a deployment scrapes with its workers' metrics
(`metrics.roles.ROUTER_NO_KV`, `ROUTER_ABANDONED`, `ROUTER_RETRIED`): prefill answers it refused for handing over no
KV, requests a client gave up on while a worker had not begun its answer, and legs sent again on a new connection
after a pooled one closed unanswered, the last two by pool and worker URL."""


def version_exposition(doc: Any, counters: tuple[VersionCount, ...]) -> str:
    """The counts `counters` names in a `/version` document, as Prometheus text (a count it lacks: no sample)."""
    out = ""
    for count in counters:
        samples: list[tuple[dict[str, str], Any]] = [({}, doc.get(count.key) if isinstance(doc, dict) else None)]
        for label in count.labels:
            samples = [({**labels, label: str(k)}, v) for labels, level in samples if isinstance(level, dict)
                       for k, v in level.items()]
        lines = ""
        for labels, value in samples:
            if isinstance(value, int | float) and not isinstance(value, bool):
                said = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
                lines += f"{count.name}_total{{{said}}} {float(value)!r}\n" if said else \
                    f"{count.name}_total {float(value)!r}\n"
        if lines:
            out += f"# TYPE {count.name} counter\n" + lines
    return out


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def federate(pages: list[tuple[MetricsTarget, str]]) -> str:
    """One Prometheus text exposition of every worker's samples (`client.scrape.parse_exposition`: what a scrape
    keeps), each labelled with its worker's role and index; every sample keeps its name (typed `untyped`, so a
    reader parses `<name>_total`, `_sum` and `_count` back as written) and its own labels. A label of the worker's
    own that the federation adds (`role`, `worker`) is kept as `exported_<label>`, as Prometheus keeps a target's
    clashing label: overwritten, two series of one worker that differed only in it became one name and label set
    twice, and a reader summed or kept one of them."""
    by_name: dict[str, list[str]] = {}
    for target, text in pages:
        extra = {ROLE_LABEL: target.role, WORKER_LABEL: str(target.index)}
        for name, labels, value in parse_exposition(text):
            merged = {(f"exported_{k}" if k in extra else k): v for k, v in labels.items()}
            merged.update(extra)
            body = ",".join(f'{k}="{_label(str(v))}"' for k, v in merged.items())
            by_name.setdefault(name, []).append(f"{name}{{{body}}} {value!r}")
    return "".join(f"# TYPE {name} untyped\n" + "".join(line + "\n" for line in lines)
                   for name, lines in by_name.items())


class _FederationServer(ThreadingHTTPServer):
    """The federation's HTTP server: a client that hung up before its answer was written (its own timeout) is no
    error of the server's (the default printed a traceback on stderr for each)."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            log.debug("federated metrics: the client at %s hung up before its answer (%s)", client_address,
                      type(exc).__name__)
            return
        super().handle_error(request, client_address)


class FederatedMetrics:
    """A loopback `/metrics` over a deployment's workers: each GET reads every worker's own `/metrics` (in parallel)
    and answers their samples labelled by role and worker (:func:`federate`). A worker that does not answer within
    `FETCH_TIMEOUT_S` makes the scrape fail (502, naming it), as a single server's failed scrape does: never a partial
    deployment. `prefix`: the workers' metric prefix (`LaunchSpec.metrics_prefix`), what the required-metrics gate
    asks for."""

    def __init__(self, targets: list[MetricsTarget], prefix: str | None) -> None:
        self.targets, self.prefix = targets, prefix
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(targets)), thread_name_prefix="llmsweep-federate")
        federation = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = federation.page() if self.path == "/metrics" else (404, "not found\n")
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = _FederationServer((LOOPBACK, 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="llmsweep-federated-metrics",
                                        daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self._server.server_address[1]}/metrics"

    def _fetch(self, target: MetricsTarget) -> str:
        # direct, never through a proxy the host sets (as the health checks and /version read-backs go)
        with DIRECT.open(target.url, timeout=FETCH_TIMEOUT_S) as resp:
            text = str(resp.read().decode("utf-8", errors="replace"))
        return version_exposition(json.loads(text), target.counters) if target.counters else text

    def page(self) -> tuple[int, str]:
        """(HTTP status, body) of one federated scrape, within `FETCH_TIMEOUT_S` however slowly the workers answer
        (the socket's timeout bounds each wait on a worker, not the whole of a worker that trickles its page)."""
        deadline = time.monotonic() + FETCH_TIMEOUT_S
        fetched = [(t, self._pool.submit(self._fetch, t)) for t in self.targets]
        pages: list[tuple[MetricsTarget, str]] = []
        for target, future in fetched:
            named = f"{target.role} worker {target.index} ({target.url})"
            try:
                pages.append((target, future.result(timeout=max(0.0, deadline - time.monotonic()))))
            except TimeoutError:  # the wait above, or the worker's socket: it took the connection, never answered
                return 502, f"{named}: no answer within {FETCH_TIMEOUT_S:g} s\n"
            except Exception as exc:  # any failure of one worker's scrape fails this scrape, named
                return 502, f"{named}: {type(exc).__name__}: {exc}\n"
        try:
            return 200, federate(pages)
        except ValueError as exc:  # a worker's page that is no Prometheus exposition
            return 502, f"a worker's metrics could not be parsed: {exc}\n"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


GPU_PARTITION_ENV = VISIBLE_CUDA
"""The variable a worker of a role-by-role deployment on one host finds its GPUs in (`gpu_partition`)."""


def gpu_partition(needs: list[tuple[str, int]], environ: Mapping[str, str] | None = None,
                  recipe: Mapping[str, str] | None = None, *,
                  queries: HostGpuQueries | None = None) -> list[str | None]:
    """Each worker's share of this host's GPUs, as a CUDA_VISIBLE_DEVICES value (None: a worker that needs none),
    given `needs`, (worker name, GPUs) in launch order: consecutive GPUs of those the workers may use — the selection
    `recipe` sets (the `*_VISIBLE_DEVICES` of the workers' launch env: the recipe's `serve.env`) over this process's,
    else all the host's, as a server runs with the recipe's env over this process's (`preflight.check_gpus`). A
    LaunchError says why when the selection names a GPU the host lacks (`preflight.HostGpuQueries.server`), when it
    does not show them all together, or when an AMD selection (HIP_/ROCR_VISIBLE_DEVICES) is set that the indices
    would be read relative to. `queries`: the host's tool, asked once for the whole placement (None: asked here)."""
    from llmsweep.visible import HIP, ROCR

    pinned = dict(recipe or {})
    env = {**(os.environ if environ is None else environ), **pinned}
    needed = sum(n for _name, n in needs)
    if needed <= 0:
        return [None for _ in needs]
    wanted = ", ".join(f"{name} {n}" for name, n in needs if n > 0)
    # (not on Slurm: a real engine's roles are launched only by the local executor, `engines.REAL_ROLES_LOCAL_ONLY`)
    fix = f"run it on a host with that many GPUs, or on the simulator ({_SIMULATE})"
    chosen = [name for name in (HIP, ROCR) if env.get(name)]
    if chosen:
        where = "in the recipe's `serve.env`" if chosen[0] in pinned else "here"
        raise LaunchError(f"the deployment's workers get their GPUs through {GPU_PARTITION_ENV}, but {chosen[0]} is "
                          f"set {where}: the indices would be read within its selection",
                          fix=f"unset {' and '.join(chosen)} (select the GPUs with {GPU_PARTITION_ENV})")
    queries = HostGpuQueries() if queries is None else queries
    gpus = count_of(needed, "GPU")
    host = queries.server(env, pinned, needs=f"the deployment's workers need {gpus} together ({wanted})")
    if host is None:
        raise LaunchError(f"the deployment's workers need {gpus} together ({wanted}) but {NO_GPU_TOOL}", fix=fix)
    tool, found = host.listed.tool, len(host.selected)
    if found < needed:
        if GPU_PARTITION_ENV in pinned:
            said = f"{GPU_PARTITION_ENV}={pinned[GPU_PARTITION_ENV]}"
            raise LaunchError(f"the deployment's workers need {gpus} together ({wanted}) but {tool} shows "
                              f"{found} under the recipe's {said}",
                              fix=f"name {gpus} in the recipe's `serve.env` {said}, or drop it there; or {fix}")
        raise LaunchError(f"the deployment's workers need {gpus} together ({wanted}) but {tool} shows "
                          f"{found} on this host", fix=fix)
    indices = list(host.selected)
    shares: list[str | None] = []
    for _name, n in needs:
        shares.append(",".join(str(i) for i in indices[:n]) if n > 0 else None)
        indices = indices[n:]
    return shares


class RolePlacement(Protocol):
    """Where the workers of one topology run, and how each is started there."""

    kind: str
    """The launcher that starts the roles, for provenance (`srun`, `local`)."""
    unit: str
    """What one started role is called in messages (`step`, `process`)."""
    units: str
    """Their plural (`steps`, `processes`), for a count of them (`words.count_of`)."""
    nodes: list[AllocatedNode]
    """The nodes the roles run on, in the topology's order (one for a single host)."""
    gpus_per_node: int | None
    """The GPUs per node the topology placed its workers by, where they run on its nodes (Slurm); None on one host."""
    job_id: str | None
    gpus: dict[tuple[str, int], str | None]
    """(role, worker index) → the GPUs this placement gave that worker on its host (`CUDA_VISIBLE_DEVICES`), where it
    partitions a host's GPUs itself (the local executor); empty where Slurm gives each step its own."""

    def node_of(self, worker: RoleWorker) -> AllocatedNode:
        """The node `worker` runs on."""
        ...

    def nodes_of(self, worker: RoleWorker) -> list[AllocatedNode]:
        """Every node `worker`'s placement spans, `node_of` first."""
        ...

    def place(self, role: Role, worker: RoleWorker) -> LaunchSpec:
        """The launch of `role`'s `worker` with its placeholders filled in: what is started."""
        ...

    def launch(self, spec: LaunchSpec, *, log_path: Path, node: AllocatedNode, label: str) -> ProcessServerHandle:
        """Start `spec` on `node` (`label` names the role's step or pid file); returns at once."""
        ...

    def release(self, handle: ProcessServerHandle) -> None:
        """`handle` was stopped: forget what recorded it for a later `--resume`, once nothing of it is left."""
        ...

    def where(self) -> str:
        """Where the roles run, for messages."""
        ...


class SlurmPlacement:
    """Every worker a step on its nodes of the current allocation (`NodeAddr` for `{nodeK}`)."""

    kind, unit, units = "srun", "step", "steps"

    def __init__(self, topology: Topology, launcher: SrunLauncher, nodes: list[AllocatedNode], *,
                 job_id: str | None) -> None:
        if topology.nodes > len(nodes):
            raise LaunchError(f"topology of job {topology.job} needs {count_of(topology.nodes, 'node')}; "
                              f"the allocation has {len(nodes)}",
                              fix="the batch job must request the topology's node count")
        self.launcher, self.nodes, self.job_id = launcher, nodes, job_id
        self.gpus_per_node: int | None = topology.gpus_per_node
        self.gpus: dict[tuple[str, int], str | None] = {}  # each step's GPUs are Slurm's to give

    def node_of(self, worker: RoleWorker) -> AllocatedNode:
        return self.nodes[worker.nodes[0]]

    def nodes_of(self, worker: RoleWorker) -> list[AllocatedNode]:
        return [self.nodes[k] for k in worker.nodes]

    def place(self, role: Role, worker: RoleWorker) -> LaunchSpec:
        return place(worker.spec, self.nodes)

    def launch(self, spec: LaunchSpec, *, log_path: Path, node: AllocatedNode, label: str) -> ProcessServerHandle:
        return self.launcher.launch(spec, log_path=log_path, node=node.name, step_label=label)

    def release(self, handle: ProcessServerHandle) -> None:
        return None  # a step outliving a killed run goes with its allocation (`run --resume` cancels it)

    def where(self) -> str:
        return ", ".join(n.name for n in self.nodes)




def _recipe_selection(topology: Topology, workers: list[tuple[Role, RoleWorker]]) -> dict[str, str]:
    """The `*_VISIBLE_DEVICES` the GPU workers' launch env sets (the recipe's `serve.env`, the same in every worker's
    launch): the GPUs their shares are taken from. Workers that set different selections are refused: the shares are
    consecutive GPUs of one."""
    seen = {tuple((name, w.spec.env[name]) for name in VISIBLE_ENV if name in w.spec.env): f"{role.name} worker "
            f"{w.index}" for role, w in workers if w.spec.gpus > 0}
    if len(seen) > 1:
        said = "; ".join(f"{who}: {' '.join(f'{k}={v}' for k, v in sel) or 'none'}" for sel, who in seen.items())
        raise LaunchError(f"the workers of job {topology.job} set different GPU selections in their launch env "
                          f"({said}); their shares of this host's GPUs are taken from one selection",
                          fix="set one CUDA_VISIBLE_DEVICES for the deployment (the recipe's `serve.env`), or none")
    return dict(next(iter(seen), ()))


class LocalPlacement:
    """Every worker and the router a process of its own on this host, each on a free loopback port: `{nodeK}` is
    loopback, every port the topology plans on a node becomes one picked free here (the router's URLs of the workers
    with them), and a worker that needs GPUs gets its share of the host's in its env (:func:`gpu_partition`), checked
    before any worker starts as an aggregated server's GPUs are (`_preflight`). Each process writes a pid file of its
    own into `server_dir` (`server.<label>.pid`), which `run --resume` after a killed run finds
    (`lifecycle.stop_stale_servers`) and which goes once the process is gone."""

    kind, unit, units = "local", "process", "processes"

    def __init__(self, topology: Topology, launcher: LocalLauncher, server_dir: Path,
                 environ: Mapping[str, str] | None = None) -> None:
        from llmsweep.execute.preflight import pick_free_ports
        from llmsweep.http_app import node_name

        self.launcher, self.server_dir = launcher, server_dir
        self.job_id: str | None = None
        self.nodes = [AllocatedNode(name=node_name(), address=LOOPBACK)]  # what a server of ours says (/version)
        self.gpus_per_node: int | None = None  # this host's GPUs are not the runner's nodes'
        self._environ = environ
        workers = [(role, w) for role in topology.roles for w in role.workers]
        if topology.engine != SIM.id and (wide := [f"{role.name} worker {w.index}" for role, w in workers
                                                   if len(w.nodes) > 1]):
            spans = "spans" if len(wide) == 1 else "span"
            raise LaunchError(f"{', '.join(wide)} of job {topology.job} {spans} several nodes (more GPUs than the "
                              f"runner's {topology.gpus_per_node} per node): on one host its launch would wait for "
                              "nodes that never start", fix="give each worker at most a node's GPUs (tp), or run it "
                              f"on the simulator ({_SIMULATE})")
        planned = sorted({(w.nodes[0], w.spec.port) for _role, w in workers})
        side = [(role.name, w.index, name, span) for role, w in workers for name, span in w.spec.side_ports.items()]
        ports = pick_free_ports(len(planned), LOOPBACK)
        with contextlib.ExitStack() as held:  # every block picked is held until all are, so none is picked twice
            blocks = [free_block(span, held, avoid=set(ports)) for *_key, span in side]
        self.ports = dict(zip(planned, ports, strict=True))
        """Each (node, port) the topology plans → the loopback port it gets here."""
        self.side_ports = {(name, index, env): base for (name, index, env, _span), base in zip(side, blocks,
                                                                                               strict=True)}
        """Each (role, worker, variable) of a port a worker listens on besides its serving port (vLLM's NIXL side
        channel, `LaunchSpec.side_ports`) → the first of the free consecutive ports it gets here: the planned ones
        (5600 and up) may be taken on this host, and two deployments on one host would share them."""
        recipe = _recipe_selection(topology, workers)
        queries = HostGpuQueries()  # the host's GPUs listed, and what computes on them asked, once for every worker
        shares = gpu_partition([(f"{role.name} worker {w.index}", w.spec.gpus) for role, w in workers], environ,
                               recipe, queries=queries)
        self.gpus = {(role.name, w.index): share for (role, w), share in zip(workers, shares, strict=True)}
        self.pid_files: list[tuple[ProcessServerHandle, Path]] = []
        self._preflight(workers, recipe, queries)

    def _preflight(self, workers: list[tuple[Role, RoleWorker]], recipe: Mapping[str, str],
                   queries: HostGpuQueries) -> None:
        """Each worker's launch preflight, before any starts: the GPUs its share selects, checked as an aggregated
        server's are (`preflight.check_gpus`: present under its selection, and, NVIDIA, no other process computing on
        them); the simulator's workers and a worker of no GPU are skipped there, as aggregated. (Its ports need no
        check: each was picked free above, as `preflight.resolve_port` picks a server's port 0.) A LaunchError names
        every worker refused, its GPUs and the fix; nothing has started."""
        from llmsweep.execute.preflight import check_gpus

        shell = (os.environ if self._environ is None else self._environ).get(GPU_PARTITION_ENV)
        if GPU_PARTITION_ENV in recipe:
            pool = f"in the recipe's `serve.env` {GPU_PARTITION_ENV}={recipe[GPU_PARTITION_ENV]}"
        elif shell is not None and shell.strip():
            pool = f"in this shell's {GPU_PARTITION_ENV}={shell}"
        else:
            pool = f"with {GPU_PARTITION_ENV}"
        reselect = (f"give the deployment free GPUs {pool} (its workers get consecutive GPUs of it, in launch order: "
                    "prefill workers first)")
        refused: list[tuple[str, str, LaunchError]] = []
        for role, worker in workers:
            share = self.gpus.get((role.name, worker.index))
            if share is None:
                continue
            try:
                check_gpus(self.place(role, worker), self._environ, reselect=reselect, queries=queries)
            except LaunchError as exc:
                refused.append((f"{role.name} worker {worker.index}", share, exc))
        if not refused:
            return
        fixes = [(who, exc.fix) for who, _share, exc in refused if exc.fix]
        fix = fixes[0][1] if len(fixes) == 1 else "; ".join(f"{who}: {said}" for who, said in fixes)
        raise LaunchError("; ".join(f"{who} ({GPU_PARTITION_ENV}={share}): {exc.message}"
                                    for who, share, exc in refused), fix=fix or None)

    def node_of(self, worker: RoleWorker) -> AllocatedNode:
        return self.nodes[0]

    def nodes_of(self, worker: RoleWorker) -> list[AllocatedNode]:
        return [self.nodes[0]]

    def place(self, role: Role, worker: RoleWorker) -> LaunchSpec:
        from llmsweep.execute.preflight import with_port

        spec = with_port(worker.spec, self.ports[(worker.nodes[0], worker.spec.port)], replacing=worker.spec.port)

        def sub(text: str) -> str:
            for (k, port), here in self.ports.items():  # a peer's URL: `{nodeK}:PORT`
                text = text.replace(f"{{node{k}}}:{port}", f"{LOOPBACK}:{here}")
            return _NODE_PLACEHOLDER.sub(LOOPBACK, text).replace(NODE_RANK, "0")

        env = {k: sub(v) for k, v in spec.env.items()}
        for name in spec.side_ports:
            env[name] = str(self.side_ports[(role.name, worker.index, name)])
        share = self.gpus.get((role.name, worker.index))
        if share is not None:
            env[GPU_PARTITION_ENV] = share
        placed = spec.model_copy(update={"argv": tuple(sub(a) for a in spec.argv), "env": env, "host": LOOPBACK})
        return in_bus_order(placed, self._environ)  # its share is nvidia-smi's indices: CUDA must count them so

    def launch(self, spec: LaunchSpec, *, log_path: Path, node: AllocatedNode, label: str) -> ProcessServerHandle:
        from llmsweep.execute.lifecycle import write_pid_file

        handle = self.launcher.launch(spec, log_path=log_path, environ=self._environ)
        path = self.server_dir / f"server.{label}.pid"
        n = 1
        while path.exists():  # a relaunch keeps what an earlier launch could not stop on record
            n += 1
            path = self.server_dir / f"server.{label}.{n}.pid"
        write_pid_file(path, handle, spec)
        self.pid_files.append((handle, path))
        return handle

    def release(self, handle: ProcessServerHandle) -> None:
        for held, path in self.pid_files:
            if held is handle and handle.gone():
                path.unlink(missing_ok=True)

    def where(self) -> str:
        return f"this host ({self.nodes[0].name}), each on a loopback port of its own"


_BLOCK_TRIES = 64


def free_block(span: int, held: contextlib.ExitStack, avoid: set[int] | None = None) -> int:
    """The first of `span` consecutive ports free on this host now (each bound, on every interface as a NIXL side
    channel binds, and held in `held` until the caller's picks are done), none of them in `avoid` (ports already
    handed out); a LaunchError when none is found."""
    for _ in range(_BLOCK_TRIES):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("", 0))
            base = int(probe.getsockname()[1])
        if base + span > 65535 or set(range(base, base + span)) & (avoid or set()):
            continue
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + span):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(sock)
                sock.bind(("", port))
        except OSError:
            for sock in socks:
                sock.close()
            continue
        for sock in socks:
            held.enter_context(sock)
        return base
    raise LaunchError(f"found no {span} consecutive free ports on this host for a worker's side channel",
                      fix="free some ports (`ss -ltn`), or run fewer deployments on this host at once")


def role_placement(launcher: object, topology: Topology, server_dir: Path, *, executor: str) -> RolePlacement:
    """The placement of `topology`'s roles by the launcher a group runs with: steps of the current Slurm allocation
    (the srun launcher), processes on this host (the local launcher of the local executor); any other launcher cannot
    place roles. `executor`: the group's (a Slurm batch job's worker that launches without srun would crowd every
    role onto the first of the nodes its allocation holds for them)."""
    from llmsweep.execute.slurm import SlurmExecutor

    if isinstance(launcher, SrunLauncher):
        return SlurmPlacement(topology, launcher, allocation_nodes(), job_id=os.environ.get("SLURM_JOB_ID"))
    if isinstance(launcher, LocalLauncher) and executor != SlurmExecutor.kind:
        return LocalPlacement(topology, launcher, server_dir)
    if isinstance(launcher, LocalLauncher):
        raise LaunchError(f"the roles of job {topology.job} start as srun steps on the nodes of its Slurm allocation, "
                          "but this batch job launches its servers without srun",
                          fix="leave node.use_srun at its default, true, in the slurm executor options")
    kind = getattr(launcher, "kind", type(launcher).__name__)
    raise LaunchError(f"the roles of job {topology.job} start as processes of this host or as srun steps of a Slurm "
                      f"allocation; the {kind} launcher cannot place them",
                      fix=f"run it with {_EXECUTOR} local, or {_EXECUTOR} slurm (node.use_srun true)")


class RoleDeployment:
    """Every role of one topology, each started by its placement (steps of the current allocation, or processes of
    this host); one :class:`ServerHandle` for the lifecycle (its URL is the router's). `stop` tears down every role
    started, router first."""

    def __init__(self, topology: Topology, placement: RolePlacement, server_dir: Path, *, launch: int = 1) -> None:
        self.topology, self.placement = topology, placement
        self.dir = server_dir / ROLES_DIR
        self.suffix = "" if launch <= 1 else f".{launch}"
        """Each launch of the group's deployment logs to files of its own (`decode-0.log`, then `decode-0.2.log`), as
        one server's relaunch does (`server.2.log`): a role's readiness marker is looked for in its log, where an
        earlier launch's marker would pass a relaunch that never came up."""
        router = topology.role("router")
        front = router or topology.roles[0]
        self.spec = placement.place(front, front.workers[0])
        self._front_log = self.dir / f"{router.name if router is not None else 'server'}-0{self.suffix}.log"
        self.scrubber = SecretScrubber(())
        self.command: tuple[str, ...] = ()
        self.user_flags: str | None = None  # each role's step is waited for on its own handle
        self.gpus_in_bus_order = False  # each role's GPUs are its own selection's, on its host
        self.started: list[tuple[Role, RoleWorker, ProcessServerHandle]] = []
        self.role_specs: dict[str, LaunchSpec] = {}
        """Each engine role's launch as its first worker started it (the router's is `spec`): the knobs a version that
        ran other than the declared one is judged again at (`lifecycle`'s version check)."""
        self.samplers: list[ProcessServerHandle] = []
        self.sampled: list[tuple[SampledWorker, Path]] = []
        """Every node (or, where one node runs several workers, every worker) a power sampler was started for, with
        the file it appends to."""
        self.cleanup: tuple[str, ...] = ()  # each role's process is stopped through its own pid file
        self.role_commands = ""
        """Every role's command line as this launch started it (secrets scrubbed): what each job's
        `server_command.txt` adds under the router's, so a job folder (and the dashboard's drill-down) says how every
        worker ran, not only the router."""
        self.sampler_problems: dict[str, str] = {}
        """Samplers that did not start (by label), and what their log said."""
        self.metrics: FederatedMetrics | None = None
        """Every worker's `/metrics` as one scrape (started with the workers; None: no worker serves metrics)."""

    @property
    def nodes(self) -> list[AllocatedNode]:
        return self.placement.nodes

    # -- start ------------------------------------------------------------------------------------------------------
    def start(self, *, startup_timeout_s: float | None, event: Callable[[str], None] | None = None,
              power_backend: BackendChoice = "auto") -> None:
        """Start the workers (prefill, then decode), wait for each, then the router; LaunchError names the role.
        `power_backend`: what the nodes' power samplers use (`run --power-backend`; a simulated worker's is its
        modelled `/power` unless it is `off`)."""
        say: Callable[[str], None] = event or (lambda _msg: None)
        self.dir.mkdir(parents=True, exist_ok=True)
        workers = [r for r in self.topology.roles if r.kind != "router"]
        routers = [r for r in self.topology.roles if r.kind == "router"]
        for batch in (workers, routers):
            launched = [self._launch(role, worker) for role in batch for worker in role.workers]
            for role, worker, handle in launched:
                node = self.placement.node_of(worker).name
                try:
                    ready = wait_ready(handle, timeout_s=startup_timeout_s, poll_s=0.25)
                except LaunchError as exc:
                    raise LaunchError(f"{role.name} worker {worker.index} on node {node} did not come up: "
                                      f"{exc.message}", fix=exc.fix) from exc
                say(f"{role.name} worker {worker.index} ready in {ready.seconds:.1f} s on {node} ({handle.base_url})")
        self._start_samplers(say, power_backend)
        self._federate(say)

    def _federate(self, say: Callable[[str], None]) -> None:
        """The workers' `/metrics` (each at its own launch's `metrics_path`) as one loopback endpoint."""
        targets, prefixes = [], set()
        for role, worker, handle in self.started:
            spec = worker.spec
            if role.kind == "router":
                # llmsweep's router (every launched deployment's): what it refused counts in the window
                # (`readback`), what clients abandoned names the worker they waited on
                targets.append(MetricsTarget(role=role.kind, index=worker.index, counters=ROUTER_COUNTERS,
                                             url=f"{handle.base_url.rstrip('/')}/version"))
                continue
            if not spec.metrics_path:
                continue
            targets.append(MetricsTarget(role=role.kind, index=worker.index,
                                         url=f"{handle.base_url.rstrip('/')}{spec.metrics_path}"))
            prefixes.add(spec.metrics_prefix)
        if not targets:
            return
        prefix = next(iter(prefixes)) if len(prefixes) == 1 else None
        with shielded():  # held before a signal can arrive, so `stop` closes it
            self.metrics = FederatedMetrics(targets, prefix)
        say(f"server metrics: {count_of(len(targets), 'worker')} scraped through {self.metrics.url}")

    def _start_samplers(self, say: Callable[[str], None], backend: BackendChoice = "auto") -> None:
        """One power sampler per node that runs a worker (`execute.node_power`), or one per worker where a node runs
        several (the roles of one host, each labelled as in virtual time: `prefill0`, `decode0`), with `backend` (it
        had always been `auto`, whatever `run --power-backend` said); on the simulator it reads the worker's modelled
        `/power`. None under `off`: each unit's power is said not sampled for that reason. A sampler that cannot
        start is said, never a reason to fail the job."""
        running = [(role, worker, handle) for role, worker, handle in self.started if role.kind != "router"]
        per_node: dict[str, int] = {}
        for _role, worker, _handle in running:
            name = self.placement.node_of(worker).name
            per_node[name] = per_node.get(name, 0) + 1
        units: dict[str, tuple[AllocatedNode, Role, RoleWorker, ProcessServerHandle]] = {}
        for role, worker, handle in running:
            node = self.placement.node_of(worker)
            label = node.name if per_node[node.name] == 1 else f"{role.name}{worker.index}"
            units.setdefault(label, (node, role, worker, handle))
        shares = self.placement.gpus
        for label, (node, role, worker, handle) in sorted(units.items()):
            folder = self.dir / POWER_DIR / label
            if backend == "off":
                self.sampled.append((SampledWorker(label=label, role=role.kind, gpus=role.gpus_per_worker),
                                     folder / GPU_METRICS_FILE))
                self.sampler_problems[label] = OFF_REASON
                continue
            argv = [sys.executable, "-m", "llmsweep.execute.node_power", "--dir",
                    str(folder), "--gpus", str(role.gpus_per_worker), "--role", role.kind]
            argv += (["--backend", "sim", "--url", handle.base_url] if self.topology.engine == SIM.id
                     else ["--backend", backend])
            # a worker with its share of this host's GPUs: its sampler reads those GPUs, not the host's first ones
            share = shares.get((role.name, worker.index))
            spec = LaunchSpec(engine="power", argv=tuple(argv), host=node.address, port=0,
                              env={GPU_PARTITION_ENV: share} if share else {})
            with shielded():
                sampler = self.placement.launch(spec, log_path=self.dir / f"power-{label}{self.suffix}.log", node=node,
                                                label=f"power-{label}")
                self.samplers.append(sampler)
            self.sampled.append((SampledWorker(label=label, role=role.kind, gpus=role.gpus_per_worker),
                                 folder / GPU_METRICS_FILE))
        if backend == "off":
            return
        deadline = time.monotonic() + _SAMPLER_START_S
        for sampler, (sampled, _path) in zip(self.samplers, self.sampled, strict=True):
            while sampler.is_alive() and READY_LINE not in sampler.tail(5) and time.monotonic() < deadline:
                time.sleep(0.1)
            tail = sampler.tail(5)  # once: a dead sampler's tail may wait a moment for its log (`settle_log`)
            if READY_LINE not in tail:
                said = "\n".join(tail.strip().splitlines()[-3:])
                self.sampler_problems[sampled.label] = said or "no output"
                say(f"warning: power sampler {sampler.log_path.name} did not start: {said}")

    def power(self, settings: PowerSettings) -> NodePowerFiles | None:
        """The node samplers as the lifecycle's sampler: each job's power block is integrated over every node's GPUs
        (`power.deployment`); None when power is neither sampled nor required (`run --power-backend off`)."""
        if settings.backend == "off" and not settings.require:
            return None
        role_gpus: dict[str, int] = {r.kind: r.count * r.gpus_per_worker for r in self.topology.roles
                                     if r.kind != "router"}
        return NodePowerFiles(self.sampled, role_gpus=role_gpus, require=bool(settings.require),
                              max_gap_s=settings.max_gap_s, not_started=self.sampler_problems)

    def _launch(self, role: Role, worker: RoleWorker) -> tuple[Role, RoleWorker, ProcessServerHandle]:
        node = self.placement.node_of(worker)
        spec = self.placement.place(role, worker)
        with shielded():  # held in `started` before a signal can arrive, so `stop` reaches it
            handle = self.placement.launch(spec, log_path=self.dir / f"{role.name}-{worker.index}{self.suffix}.log",
                                           node=node, label=f"{role.name}{worker.index}")
            self.started.append((role, worker, handle))
        if role.kind != "router":
            self.role_specs.setdefault(role.kind, spec)
        share = spec.env.get(GPU_PARTITION_ENV)
        side = [f"{name}={spec.env[name]}" for name in spec.side_ports if name in spec.env]
        said = handle.scrubber.scrub(f"# {role.name} worker {worker.index} on {node.name}\n"
                                     + (f"# its GPUs: {GPU_PARTITION_ENV}={share}\n" if share else "")
                                     + (f"# its side-channel {noun(len(side), 'port')}: {' '.join(side)}\n"
                                        if side else "")
                                     + f"{shell.join(handle.command)}\n")
        self.role_commands += said
        with open(self.dir / COMMANDS_FILE, "a", encoding="utf-8") as fh:  # what each role ran, secrets scrubbed
            fh.write(said)
        if role.kind == "router" or len(self.topology.roles) == 1:
            self.scrubber, self.command = handle.scrubber, handle.command
        return role, worker, handle

    # -- ServerHandle -----------------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return self.spec.base_url

    @property
    def pid(self) -> int | None:
        return self.started[-1][2].pid if self.started else None

    @property
    def job_id(self) -> str | None:
        return self.placement.job_id

    @property
    def returncode(self) -> int | None:
        dead = self._dead()
        return dead[2].returncode if dead is not None else None

    @property
    def log_path(self) -> Path:
        """The log a failure quotes (and a job folder keeps as its `server.log`): the first role that died's, else
        the router's. It used to be the router's always, so a job whose decode worker died showed the decode
        worker's tail under the router log's name."""
        dead = self._dead()
        return dead[2].log_path if dead is not None else self._front_log

    @log_path.setter
    def log_path(self, path: Path) -> None:
        self._front_log = path

    @property
    def dead_role(self) -> str | None:
        """Which role died first (`decode worker 0 on mn2`, `the router on mn0`), for the failure's headline; None
        while every role runs."""
        dead = self._dead()
        if dead is None:
            return None
        role, worker, _handle = dead
        node = self.placement.node_of(worker).name
        return f"the {role.name} on {node}" if role.kind == "router" else f"{role.name} worker {worker.index} on {node}"

    def exit_cause(self) -> str | None:
        """What ended the role that died first, as its own handle tells; None while every role runs."""
        dead = self._dead()
        return dead[2].exit_cause() if dead is not None else None

    def exit_fix(self, tail_lines: int = DEFAULT_TAIL_LINES) -> str | None:
        """The launcher's fix for the exit of the role that died first, as its own handle gives it; None while every
        role runs."""
        dead = self._dead()
        return dead[2].exit_fix(tail_lines) if dead is not None else None

    def _dead(self) -> tuple[Role, RoleWorker, ProcessServerHandle] | None:
        return next((s for s in self.started if not s[2].is_alive()), None)

    def is_alive(self) -> bool:
        return bool(self.started) and self._dead() is None

    def stop(self, grace_s: float = 10.0) -> int | None:
        """Stop every started role, the router first (it holds the client's connections), then the workers."""
        rc = None
        with shielded():
            for _role, _worker, handle in reversed(self.started):
                code = handle.stop(grace_s)
                self.placement.release(handle)
                rc = code if rc is None else rc
            for sampler in self.samplers:  # last, so the samples cover the teardown; SIGTERM writes the node's file
                sampler.stop(grace_s)
                self.placement.release(sampler)
            if self.metrics is not None:
                self.metrics.stop()
                self.metrics = None
        return rc

    def gone(self) -> bool:
        return all(handle.gone() for _r, _w, handle in self.started) and all(s.gone() for s in self.samplers)

    def tail(self, lines: int = DEFAULT_TAIL_LINES) -> str:
        """The log tail of the first role that died (named), else the router's."""
        shown = self._dead() or (self.started[-1] if self.started else None)
        if shown is None:
            return ""
        role, worker, handle = shown
        return f"[{role.name} worker {worker.index} on {self.placement.node_of(worker).name}]\n{handle.tail(lines)}"

    # -- read back --------------------------------------------------------------------------------------------------
    def readback(self) -> RanTopology:
        """Every started role's own account (`/version`: role, node, GPUs, KV transfer, EP size, DP-attention ranks);
        a role that reports another role, a node other than the one it was placed on, or another GPU count, KV
        transfer, expert-parallel size or DP-attention rank count than the topology plans for it fails the job. What
        a worker does not report stays None in its `placed` entry (and out of the role's `describe()`)."""
        from llmsweep.engines import get_adapter

        roles: dict[str, RanRole] = {}
        transfer: str | None = None
        engine = get_adapter(self.topology.engine)
        real = self.topology.engine != SIM.id
        router: dict[str, Any] | None = None
        for role, worker, handle in self.started:
            version = server_version(handle.base_url)
            placed = self.placement.node_of(worker).name
            if role.kind == "router":
                doc, router = version, version
            else:  # what the engine says the worker runs as: its /version, or its log where that says nothing
                doc = engine.role_report(version, _log_head(handle.log_path) if real else "")
            said_role, said_node = doc.get("role"), doc.get("node")
            if real and role.kind != "router":
                self._check_real_worker(role, placed, doc)
            if said_role is not None and said_role != role.kind:
                raise LaunchError(f"the {role.name} {self.placement.unit} on {placed} says it serves as {said_role}",
                                  fix=f"check the role's launch (`llmsweep render {_JOB} ID`)")
            if said_node is not None and said_node != placed:
                raise LaunchError(f"the {role.name} {self.placement.unit} placed on {placed} says it runs on "
                                  f"{said_node}", fix="check the node's name (Slurm's, or this host's) and where "
                                  "the role was placed (srun --nodelist)")
            said_transfer = doc.get("kv_transfer")
            if (role.kind != "router" and isinstance(said_transfer, str) and self.topology.kv_transfer is not None
                    and said_transfer != self.topology.kv_transfer):
                raise LaunchError(f"the {role.name} {self.placement.unit} on {placed} says it moves KV over "
                                  f"{said_transfer}; the job moves KV over {self.topology.kv_transfer}",
                                  fix=f"check the role's launch (`llmsweep render {_JOB} ID`): its KV-transfer flags")
            if role.kind == "decode" and isinstance(said_transfer, str):
                transfer = said_transfer
            tp = doc.get("tp")
            if isinstance(tp, int) and tp != role.gpus_per_worker:
                raise LaunchError(f"the {role.name} {self.placement.unit} on {placed} says it runs on "
                                  f"{count_of(tp, 'GPU')}; the topology plans {role.gpus_per_worker} per "
                                  f"{role.kind} worker",
                                  fix=f"check the role's launch (`llmsweep render {_JOB} ID`): its parallelism flags")
            for what, key, planned in (("an expert-parallel size of", "ep", role.ep),
                                       ("DP-attention ranks:", "dp_attention", role.dp_ranks)):
                said_size = doc.get(key)  # what a worker does not report is not checked: its describe() omits it
                if isinstance(said_size, int) and planned is not None and said_size != planned:
                    raise LaunchError(f"the {role.name} {self.placement.unit} on {placed} says it runs {what} "
                                      f"{said_size}; the job plans {planned} per {role.kind} worker",
                                      fix=f"check the role's launch (`llmsweep render {_JOB} ID`): its parallelism "
                                          "flags")
            ran = roles.setdefault(role.name, RanRole(role=role.kind, count=role.count,
                                                      gpus_per_worker=role.gpus_per_worker, workers=[]))
            ep, batch, links, dp = (doc.get(k) for k in ("ep", "max_running_requests", "kv_links", "dp_attention"))
            ran.workers.append(RanWorker(index=worker.index, node=placed,
                                         nodes=[n.name for n in self.placement.nodes_of(worker)],
                                         reported_node=str(said_node) if said_node is not None else None,
                                         url=handle.base_url, gpus=tp if isinstance(tp, int) else None,
                                         version=_text(doc.get("version")), kv_role=_text(doc.get("kv_role")),
                                         simulator_digest=_text(doc.get("simulator_digest")),
                                         calibration=_text(doc.get("calibration")),
                                         connector=_text(doc.get("connector")),
                                         engine_id=_text(doc.get("engine_id")),
                                         ep=ep if isinstance(ep, int) else None,
                                         max_running_requests=batch if isinstance(batch, int) else None,
                                         dp_attention=dp if isinstance(dp, int) else None,
                                         kv_links=[link for link in links if isinstance(link, dict)]
                                         if isinstance(links, list) else []))
        for ran in roles.values():
            if len(ran.workers) != ran.count:
                raise LaunchError(f"{len(ran.workers)} of {count_of(ran.count, f'{ran.role} worker')} started",
                                  fix="read the role logs in the server directory")
        if router is not None:
            self._check_router_routes(router, roles)
        self._check_one_simulator_build(roles)
        return RanTopology(disaggregated=self.topology.disaggregated, nodes=[n.name for n in self.nodes],
                           gpus_per_node=self.placement.gpus_per_node, kv_transfer=transfer,
                           engine=self.topology.engine,
                           router=_router_said(router, self.topology), router_policy=_router_policy(router),
                           gpus=sum(r.count * r.gpus_per_worker for r in roles.values()), roles=list(roles.values()))

    def _check_router_routes(self, doc: dict[str, Any], roles: dict[str, RanRole]) -> None:
        """The router must route to the prefill and decode workers that started, in their order (a decode worker's
        link to prefill worker K is the router's K-th), as its `/version` says: a router pointed at fewer, other or
        reordered workers ran another deployment than the one recorded (idle workers' GPUs would count in every
        per-GPU figure), though every worker came up and said what it serves as."""
        where = next((self.placement.node_of(w).name for r, w, _h in self.started if r.kind == "router"), "?")
        for kind in ("prefill", "decode"):
            said = doc.get(kind)
            if said is None:  # a router that does not say is not checked (as any worker's unsaid field)
                continue
            started = [w.url.rstrip("/") for ran in roles.values() if ran.role == kind
                       for w in sorted(ran.workers, key=lambda w: w.index)]
            routes = [str(u).rstrip("/") for u in said] if isinstance(said, list) else said
            if routes != started:
                raise LaunchError(f"the router {self.placement.unit} on {where} routes to {kind} workers {routes}; "
                                  f"the {kind} workers started are {started}",
                                  fix=f"check the router's launch (`llmsweep render {_JOB} ID`): its "
                                      f"{_PREFILL_URLS} and {_DECODE_URLS} URLs must name every worker, in order")

    def _check_one_simulator_build(self, roles: dict[str, RanRole]) -> None:
        """Every role that says which simulator build it runs (`simulator_digest`: its code and catalogs) must say the
        same one: a result records one build (`provenance.simulator.digest`), which a reader compares across runs
        (`ResultPoint.simulator_build`), and workers of two builds model two engines. It was the router's `/version`
        alone, so a worker started from another tree (a node's older install) ran unnoticed under the router's."""
        said: dict[str, list[str]] = {}
        for ran in roles.values():
            for w in sorted(ran.workers, key=lambda w: w.index):
                if w.simulator_digest is not None:
                    said.setdefault(w.simulator_digest, []).append(f"{ran.role} {w.index} ({w.url})")
        if len(said) > 1:
            builds = "; ".join(f"{digest} by {', '.join(who)}" for digest, who in said.items())
            raise LaunchError(f"the roles of job {self.topology.job} run different simulator builds: {builds}",
                              fix="start every role from one llmsweep install (the same tree on every node: "
                                  "`llmsweep sim serve` and `llmsweep sim router` from one python)")

    def _check_real_worker(self, role: Role, placed: str, doc: dict[str, Any]) -> None:
        """A real engine's worker must say what it runs as (its role, its KV connector) and say what was planned: a
        worker that says nothing is no proof of a disaggregated run, and one that says another role or connector
        ran another deployment than the job's."""
        where = f"the {role.name} {self.placement.unit} on {placed}"
        fix = f"read its log in the server directory's roles/ folder, and its launch (`llmsweep render {_JOB} ID`)"
        if doc.get("role") is None:
            raise LaunchError(f"{where} did not say which KV role it runs as (kv_role "
                              f"{doc.get('kv_role') or 'not in its log'}): no proof it serves as {role.kind}", fix=fix)
        planned = self.topology.kv_transfer
        said = doc.get("kv_transfer")
        if planned is not None and said != planned:
            raise LaunchError(f"{where} says its KV connector is {doc.get('connector') or 'none (not in its log)'}; "
                              f"the job moves KV over {planned}", fix=fix)
        if not isinstance(doc.get("tp"), int):
            raise LaunchError(f"{where} did not say how many GPUs it runs on (its parallel sizes are not in its "
                              "log)", fix=fix)


_LOG_HEAD_BYTES = 8 << 20


def _log_head(path: Path) -> str:
    """The start of a worker's log, where an engine writes what it runs as (empty when there is none)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(_LOG_HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _text(value: Any) -> str | None:
    return str(value) if value is not None else None


def _router_policy(doc: dict[str, Any] | None) -> str | None:
    """The routing policy the router's `/version` says (`policy`); None, with a warning, where it says none."""
    if doc is None:  # no router ran
        return None
    policy = doc.get("policy")
    if isinstance(policy, str) and policy:
        return policy
    log.warning("the router's /version says no routing policy: the deployment records none (router_policy null)")
    return None


def _router_said(doc: dict[str, Any] | None, topology: Topology) -> dict[str, Any] | None:
    """What the router that ran says it is (llmsweep's, and its protocol), from its `/version`; None when it says
    neither (the simulator's own router)."""
    if doc is None or (doc.get("router") is None and doc.get("protocol") is None):
        return None
    return {"router": doc.get("router"), "protocol": doc.get("protocol"), "version": doc.get("router_version")}
