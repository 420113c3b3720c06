"""LaunchSpec: everything an executor needs to start a server and know it is ready, and nothing about where.

Rendered by an engine adapter from a Job; written beside the results as `server_command.txt`; compared by its
fingerprint to decide which jobs can share one server (engine start-up takes minutes on real GPUs).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator

from llmsweep import shell
from llmsweep.words import count_of

SECRET_NAME = re.compile(r"(^HF_TOKEN$|_TOKEN$|_KEY$|_SECRET$)")
LAUNCH_DIR = "{launch_dir}"
"""Placeholder in argv/env for the folder the launch's files are written to (`LaunchSpec.files`); the executor
substitutes it (`execute.artifacts.write_launch_files`) where the server runs, `render --format sh` with `.`."""
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class LaunchFile(BaseModel):
    """A file the engine reads at start-up, written beside the launch (TensorRT-LLM's extra_llm_api_options.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Plain file name (no folder); the argv names it as `{launch_dir}/NAME`.")
    content: str = Field(description="The file's exact text.")
    description: str = Field(default="", description="What the engine reads from it.")

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not _FILE_NAME.match(value):
            raise ValueError(f"launch file name {value!r} must be a plain file name (letters, digits, . _ -)")
        return value

    @property
    def placeholder_path(self) -> str:
        """How argv refers to the file before the executor places it."""
        return f"{LAUNCH_DIR}/{self.name}"


ENV_NAME = shell.NAME
"""Names a shell accepts in `NAME=value` and `export NAME=value` (the recipe loader rejects every other name)."""

env_assignment = shell.assignment
"""`NAME=value` for a shell, the value one inert word with no raw control character (`llmsweep.shell`); a name that is
not a variable name (the loader rejects those; this is the second line of defence) is quoted whole."""


def secret_reference(name: str) -> str | None:
    """`NAME="${NAME}"`: pass a secret through by name. None for a name no shell can reference."""
    return f'{name}="${{{name}}}"' if ENV_NAME.fullmatch(name) else None


def comment_text(text: str) -> str:
    """Text safe to put after `# ` in a shell script: newlines and other control characters escaped, so a value
    cannot end the comment and start a command."""
    from llmsweep.findings import visible_text

    return visible_text(text)


def is_secret_name(name: str, extra_secret: frozenset[str] | set[str] = frozenset()) -> bool:
    """Environment names whose values must never be written down (HF_TOKEN, *_TOKEN, *_KEY, *_SECRET, or marked)."""
    return name in extra_secret or bool(SECRET_NAME.search(name))


class LaunchSpec(BaseModel):
    """How to start one engine server. Values of secret env vars are never stored here: only their names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: str = Field(description="Adapter name: sglang, vllm, trtllm, atom, sim, transformers.")
    engine_version: str | None = Field(default=None, description="Engine version the image resolves to, if known.")
    image: str | None = Field(default=None, description="Container image the server runs in (None: host).")
    argv: tuple[str, ...] = Field(description="Server command line, argv[0] first.")
    env: dict[str, str] = Field(default_factory=dict, description="Non-secret environment for the server.")
    secret_env: tuple[str, ...] = Field(
        default=(), description="Names of secret variables passed through from the caller's environment by name."
    )
    host: str = "127.0.0.1"
    port: int
    health_path: str = "/health"
    metrics_path: str | None = "/metrics"
    metrics_prefix: str | None = Field(default=None, description="Prometheus name prefix, e.g. 'sglang:' or 'vllm:'.")
    ready_log_markers: tuple[str, ...] = Field(
        default=(), description="Log lines that mean the server is ready (any one suffices, with the health check)."
    )
    served_model_name: str | None = None
    api_base: str = Field(default="/v1", description="Path prefix of the OpenAI-compatible API.")
    rejected_request_fields: tuple[str, ...] = Field(
        default=(), description="OpenAI request fields the server answers with HTTP 422; the client leaves them out."
    )
    startup_timeout_s: float = Field(default=1800.0, description="How long to wait for readiness before failing.")
    gpus: int = 0
    port_flag: str = Field(
        default="--port", description="The flag argv carries the serving port in (ATOM: --server-port); a port 0 "
        "after it is replaced by the port the executor picks."
    )
    files: tuple[LaunchFile, ...] = Field(
        default=(), description="Files written beside the launch before it starts; argv names them by "
        f"`{LAUNCH_DIR}/NAME`."
    )
    files_dir: str | None = Field(
        default=None, description="Where the files were written (set by the executor; None before): a container "
        "launcher mounts it at the same path."
    )
    side_ports: dict[str, int] = Field(
        default_factory=dict, description="Environment variables holding a port the server listens on besides its "
        "serving port (vLLM's NIXL side channel) → how many consecutive ports from it it binds; a placement of "
        "several servers on one host moves each to free ones."
    )
    notes: tuple[str, ...] = Field(default=(), description="Human notes the adapter wants reviewers to read.")

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def shell_command(self) -> str:
        """The command as one shell line, env assignments first; secrets referenced by name, never by value."""
        assigns = [env_assignment(k, v) for k, v in sorted(self.env.items())]
        assigns += [ref for ref in (secret_reference(name) for name in self.secret_env) if ref is not None]
        # A name that is not a variable name is not an assignment to the shell: `env` sets it, inertly.
        prefix = ["env"] if any(not ENV_NAME.fullmatch(k) for k in self.env) else []
        return " ".join([*prefix, *assigns, *(shell.quote(a) for a in self.argv)])

    def with_launch_dir(self, directory: str) -> LaunchSpec:
        """The spec with `{launch_dir}` in argv and env replaced by `directory` (where its files are, or will be)."""
        if not self.files:
            return self
        argv = tuple(a.replace(LAUNCH_DIR, directory) for a in self.argv)
        env = {k: v.replace(LAUNCH_DIR, directory) for k, v in self.env.items()}
        return self.model_copy(update={"argv": argv, "env": env, "files_dir": directory})

    def fingerprint(self) -> str:
        """Stable hash of what would be launched: jobs with equal fingerprints can share one server."""
        # The client dialect is how to talk to the server, not what is launched: old fingerprints stay valid.
        # The port flag is already in argv, and where the files were written is not what is launched; a spec
        # without files hashes as before files existed.
        skip = {"notes", "startup_timeout_s", "rejected_request_fields", "port_flag", "files_dir", "side_ports"}
        if not self.files:
            skip.add("files")
        payload: dict[str, Any] = self.model_dump(mode="json", exclude=skip)
        # The interpreter that runs llmsweep's own servers (`sys.executable`: the simulator, its router) is where this
        # process lives, not what is launched: another venv or path to the same llmsweep launches the same server.
        payload["argv"] = [THIS_PYTHON if a == sys.executable else a for a in payload["argv"]]
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


THIS_PYTHON = "{python}"
"""What `LaunchSpec.fingerprint` hashes for the path of the interpreter running llmsweep, where argv names it."""

NODE_HOST = "{{node{index}}}"
"""Placeholder in a role's argv/env for the host of node `index` of the job's allocation (`{node0}`, `{node1}`, …);
whatever places the roles substitutes the node's address (unverified: no executor places roles yet)."""
NODE_RANK = "{node_rank}"
"""Placeholder for a worker's node rank when one worker spans several nodes (each node runs the same launch)."""

RoleKind = Literal["server", "prefill", "decode", "router"]


def node_host(index: int) -> str:
    """The placeholder for node `index` (0-based within the job's allocation)."""
    return NODE_HOST.format(index=index)


class RoleWorker(BaseModel):
    """One worker of a role: where it lands and exactly what it launches."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int = Field(ge=0, description="The worker's index within its role.")
    nodes: tuple[int, ...] = Field(description="Node indices within the job's allocation the worker runs on.")
    spec: LaunchSpec = Field(description="The launch on each of those nodes (`{node_rank}` differs per node); on "
                             "the nodes after the first, `follower` where it is set.")
    follower: LaunchSpec | None = Field(
        default=None, description="The launch on the worker's nodes after its first, where it differs from `spec` "
        "(vLLM's nodes of rank >= 1 run `--headless`: no API server); None: every node runs `spec`.")

    def spec_on(self, node_rank: int) -> LaunchSpec:
        """The launch on the worker's node of rank `node_rank` (0: its first node, the one that serves)."""
        if not 0 <= node_rank < len(self.nodes):
            raise ValueError(f"worker {self.index} spans {count_of(len(self.nodes), 'node')}; it has no node rank "
                             f"{node_rank}")
        return self.follower if node_rank > 0 and self.follower is not None else self.spec


class Role(BaseModel):
    """A pool of identical workers: the aggregated server, the prefill or decode pool, or the router/frontend."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Role name as printed (`server`, `prefill`, `decode`, `router`).")
    kind: RoleKind
    count: int = Field(ge=1, description="Workers in the pool (InferenceX `num-worker`).")
    gpus_per_worker: int = Field(ge=0, description="GPUs one worker uses (tp·pp·pcp; 0 for a router).")
    nodes_per_worker: int = Field(ge=0, description="Nodes one worker spans: ceil(GPUs per worker / GPUs per node).")
    ep: int | None = Field(default=None, ge=1, description="The expert-parallel size each worker is launched with "
                           "(None: a router, which runs no engine).")
    dp_ranks: int | None = Field(default=None, ge=1, description="The DP-attention ranks each worker is launched with "
                                 "(1: none; None: a router).")
    workers: tuple[RoleWorker, ...]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gpus(self) -> int:
        return self.count * self.gpus_per_worker


class Topology(BaseModel):
    """Every role a job launches, on which nodes, with which launch: one `server` role for an aggregated job."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job: str
    engine: str
    disaggregated: bool
    gpus_per_node: int | None = Field(description="GPUs per node of the job's runner (None: single-node job).")
    nodes: int = Field(ge=0, description="Nodes the allocation needs (0: a single-node job placed by its executor).")
    kv_transfer: str | None = Field(default=None, description="KV-transfer backend between prefill and decode.")
    roles: tuple[Role, ...]
    notes: tuple[str, ...] = ()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gpus(self) -> int:
        """GPUs of every role together (a router's are 0): the job's GPUs."""
        return sum(r.gpus for r in self.roles)

    def role(self, kind: RoleKind) -> Role | None:
        return next((r for r in self.roles if r.kind == kind), None)
