"""`llmsweep render FILE --job ID`: the exact server command and environment of one job, secrets by name.

Also for a job that fails validation (its findings go to stderr first), so a reviewer reads what would have run; the
exit status is then 2, as `validate`'s, so `render --format sh > job.sh && bash job.sh` never runs a job `run` would
refuse. `--format sh` writes a runnable script; `json` the LaunchSpec. Exit 0 otherwise, 2 also when the input cannot
be parsed or planned, or the job is unknown (listing candidates).

A multinode (disaggregated prefill/decode) job renders role by role (`engines.render_topology`): every prefill and
decode worker with its own parallelism and nodes, and the router; `json` is then `{"job", "topology"}`. `sh` refuses
it: one script runs on one host, and the roles run on several nodes. A job whose engine or framework llmsweep cannot
launch disaggregated is refused with the reason (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from llmsweep.cli.options import json_option, option, recipe_files_argument, runner_config_option
from llmsweep.engines.launch import ENV_NAME, LaunchSpec, Topology, comment_text
from llmsweep.errors import ConfigError, ContractError, LlmsweepError
from llmsweep.plan.job import Job
from llmsweep.shell import assignment, quote
from llmsweep.words import count_of, noun


def render_text(job: Job, spec: LaunchSpec) -> str:
    """Human form: what, where, env (one per line), secrets by name, then the command one flag per line."""
    lines = [f"# job: {job.id}", f"# engine: {spec.engine}" + (f" {spec.engine_version}" if spec.engine_version
                                                                  else ""),
             f"# image: {spec.image or '(host)'}", f"# endpoint: {spec.base_url}{spec.api_base} "
             f"(health {spec.health_path}, metrics {spec.metrics_path or '-'})"]
    lines = [comment_text(line) for line in lines]
    lines += [f"# note: {comment_text(n)}" for n in spec.notes]
    lines += [assignment(k, v) for k, v in sorted(spec.env.items())]
    lines += [f"{comment_text(name)}=<from caller's environment>" for name in spec.secret_env]
    for file in spec.files:
        what = file.description or "read by the engine"
        lines.append(comment_text(f"# file {file.placeholder_path} (written beside the launch; {what}):"))
        lines += [comment_text(f"#   {line}") for line in file.content.splitlines()]
    lines.append(_command_lines(spec))
    return "\n".join(lines)


def render_topology_text(job: Job, topology: Topology) -> str:
    """Human form of a disaggregated job: the allocation, then every role's workers, each as `render_text` prints a
    single launch (host placeholders `{nodeN}` stand for node N of the allocation)."""
    lines = [f"# job: {job.id}",
             f"# topology: {count_of(topology.nodes, 'node')}"
             + (f" of {count_of(topology.gpus_per_node, 'GPU')}" if topology.gpus_per_node is not None else "")
             + f", {count_of(topology.gpus, 'GPU')} in use, KV transfer {topology.kv_transfer or '-'}"]
    lines += [f"# note: {n}" for n in topology.notes]
    for role in topology.roles:
        if role.gpus_per_worker == 0:
            nodes = sorted({n for w in role.workers for n in w.nodes})
            lines.append(f"# role {role.name}: {count_of(role.count, 'worker')}, no GPUs, beside the workers on "
                         f"{noun(len(nodes), 'node')} "
                         f"{', '.join(str(n) for n in nodes)}")
            continue
        lines.append(f"# role {role.name}: {count_of(role.count, 'worker')} × {count_of(role.gpus_per_worker, 'GPU')}, "
                     f"{count_of(role.nodes_per_worker, 'node')} each")
    blocks = ["\n".join(comment_text(line) for line in lines)]
    for role in topology.roles:
        for worker in role.workers:
            shown = worker.nodes if worker.follower is None else worker.nodes[:1]
            head = comment_text(f"# ---- {role.name} {worker.index} on {noun(len(shown), 'node')} "
                                f"{', '.join(str(n) for n in shown)}")
            blocks.append(head + "\n" + render_text(job, worker.spec))
            if worker.follower is not None:  # the worker's other nodes run another launch (vLLM's `--headless`)
                head = comment_text(f"# ---- {role.name} {worker.index}, its {noun(len(worker.nodes) - 1, 'node')} "
                                    f"after the first: {', '.join(str(n) for n in worker.nodes[1:])}")
                blocks.append(head + "\n" + render_text(job, worker.follower))
    return "\n\n".join(blocks)


def _command_lines(spec: LaunchSpec) -> str:
    parts: list[str] = []
    for token in spec.argv:
        quoted = quote(token)
        if token.startswith("--") and parts:
            parts.append(" \\\n  " + quoted)
        else:
            parts.append((" " if parts else "") + quoted)
    return "".join(parts)


def render_sh(job: Job, spec: LaunchSpec) -> str:
    """A runnable script: strict mode, exports, secrets required from the caller, exec of the server."""
    lines = ["#!/usr/bin/env bash", comment_text(f"# llmsweep render: job {job.id}"),
             comment_text(f"# image: {spec.image or '(host)'}"), "set -euo pipefail"]
    for name in spec.secret_env:
        if ENV_NAME.fullmatch(name):
            lines.append(f'export {name}="${{{name}:?set {name} in the caller environment}}"')
        else:  # the loader rejects such names; never let one reach the shell as code
            lines.append(f"# secret-env entry {name!a} is not a variable name: left out")
    # The launch's files go into the folder the script runs in, under the names argv gives them; the content is one
    # quoted word (no here-document a recipe value could close).
    for file in spec.files:
        lines.append(f"printf '%s\\n' {quote(file.content.rstrip(chr(10)))} > ./{quote(file.name)}")
    spec = spec.with_launch_dir(".")
    # Names are validated at load; an invalid one is quoted whole, so `export` fails on it (set -e) and runs nothing.
    lines += [f"export {assignment(k, v)}" for k, v in sorted(spec.env.items())]
    lines.append("exec " + _command_lines(spec))
    return "\n".join(lines) + "\n"


@click.command("render")
@recipe_files_argument()
@option("job", dest="selector", required=True, help="Job id, unique id prefix or exp-name.")
@option("simulate", help="Render the simulator stand-in for the job.")
@option("format", type=click.Choice(["text", "sh", "json"]), default="text", show_default=True)
@json_option("the launch (as --format json)")
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="Port to render, 1 to 65535 (default: the engine's).")
@option("evals_only", help="Plan the eval rows as eval-only jobs (as `run --evals-only`): render an eval job's "
        "launch, at the eval context length and without synthetic acceptance.")
@option("all_evals", help="Plan as `run --all-evals` (every 8k1k and agentic row an eval-only job).")
@runner_config_option()
@option("runner_labels")
def render(files: tuple[Path, ...], selector: str, simulate: bool, fmt: str, as_json: bool, port: int | None,
           evals_only: bool, all_evals: bool, runner_config: Path | None, runner_labels: tuple[str, ...]) -> int:
    """Print the exact server command and environment of a job (secrets by name only)."""
    if as_json:  # `--json`, as every command spells it; `--format json` keeps working
        if click.get_current_context().get_parameter_source("fmt") != click.core.ParameterSource.DEFAULT \
                and fmt != "json":
            raise click.UsageError(f"--json and --format {fmt} ask for two outputs on stdout: give one of them")
        fmt = "json"
    from llmsweep import engines
    from llmsweep.plan import select_job
    from llmsweep.policy import validate_files

    try:
        from llmsweep.plan.matrix import EvalOptions

        result = validate_files(list(files), runner_config=runner_config, simulate=simulate,
                                evals=EvalOptions(evals_only=evals_only, all_evals=all_evals),
                                runner_labels=runner_labels)
        unparsed = [f for f in result.loaded.findings if f.is_error and f.rule in ("schema.file", "schema.yaml-syntax")]
        if unparsed or not result.jobs:
            for f in result.loaded.findings:
                click.echo(f.render(), err=True)
            if not unparsed and (evals_only or all_evals) and not any(f.is_error for f in result.loaded.findings):
                flag = "--evals-only" if evals_only else "--all-evals"
                raise ConfigError(f"no job to render: {flag} keeps only eval jobs, and no row of these recipes runs an "
                                  "eval (eval rows are chosen across the matrix the files belong to: a "
                                  "configuration's eval may be another file's row)",
                                  fix=f"drop {flag} to render the throughput jobs, or name the file whose row runs "
                                      "the eval (`llmsweep matrix full-sweep --config-files FILE...` marks the eval "
                                      "rows)")
            raise ConfigError("no job to render: the input could not be parsed or planned",
                              fix="fix the findings above (`llmsweep validate` lists them)")
        job = select_job(result.jobs, selector)
        from llmsweep.evals.harness import EvalSettings
        from llmsweep.policy.inputs import check_side_inputs

        check_side_inputs([job], EvalSettings(), simulate=simulate)  # what `run` refuses the job's inputs for
        findings = result.findings_for(job)
        refusals = result.refusals(job)  # what `run` refuses it for, also another recipe of the invocation
        # and what of the matrix the file belongs to its eval rows were chosen without (`spec.scope.Matrix`)
        left_out = result.matrix.left_out if result.matrix is not None else []
        for f in [*findings, *(r for r in refusals if all(r is not f for f in findings)), *left_out]:
            click.echo(f.render(), err=True)
        if job.multinode:  # its workers placed by the fleet it was planned with (`engines.runner_gpus_per_node`)
            topology = engines.render_topology(job, simulate=simulate, port=port)
            if fmt == "sh":
                raise ContractError(f"job {job.id} is multinode: its {len(topology.roles)} roles run on "
                                    f"{count_of(topology.nodes, 'node')}, and one script runs on one host",
                                    fix="use --format text or --format json (the topology, every role's launch)")
        else:
            spec = engines.render(job, simulate=simulate, port=port)
    except LlmsweepError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    if job.multinode:
        if fmt == "json":
            click.echo(json.dumps({"job": job.id, "topology": topology.model_dump(mode="json")}, indent=2))
        else:
            click.echo(render_topology_text(job, topology), color=True)  # never stripped: the text is exact
    elif fmt == "json":
        click.echo(json.dumps({"job": job.id, **spec.model_dump(mode="json")}, indent=2))
    elif fmt == "sh":
        click.echo(render_sh(job, spec), nl=False, color=True)  # never stripped: the script is exact
    else:
        click.echo(render_text(job, spec), color=True)
    if refusals:
        click.echo(f"error: {count_of(len(refusals), 'error')} above: `run` refuses job {job.id} (its launch is "
                   "printed for review)", err=True)
        return 2
    return 0
