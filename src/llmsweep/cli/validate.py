"""`llmsweep validate | rules | schema`: check recipes before any GPU hour, list the rules, print the JSON Schema.

`validate` exits 2 when any finding is an error, 0 with warnings only; it never prints a traceback. Human output is
one paragraph per finding (`Finding.render()`); `--json` is a list of finding objects for CI bots (that shape is
kept: readers iterate it). Both say the totals — recipes, jobs, errors, warnings — on stderr, in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from llmsweep.cli.options import config_keys_option, json_option, option, recipe_files_argument, runner_config_option
from llmsweep.errors import LlmsweepError
from llmsweep.findings import has_errors
from llmsweep.words import count_of


@click.command("validate")
@recipe_files_argument()
@config_keys_option()
@option("simulate", help="Check as the simulator would run it: image/version findings warn.")
@json_option("the list of findings")
@runner_config_option()
@option("runner_labels")
def validate(files: tuple[Path, ...], config_keys: tuple[str, ...], simulate: bool, as_json: bool,
             runner_config: Path | None, runner_labels: tuple[str, ...]) -> int:
    """Check recipes against the schema, policy and engine contracts (exit 2 on any error)."""
    from llmsweep.policy import validate_files

    try:
        result = validate_files(list(files), config_keys=list(config_keys) or None, runner_config=runner_config,
                                simulate=simulate, runner_labels=runner_labels)
    except LlmsweepError as exc:
        raise click.exceptions.Exit(_fail(exc)) from None
    from llmsweep.evals.harness import EvalSettings
    from llmsweep.policy.inputs import input_findings

    # what `run` refuses before any job starts (catalog files the jobs read, the evals' floors under the default task):
    # findings like the recipes', in the table, the totals and --json
    findings = [*result.findings, *input_findings(result.jobs, EvalSettings(), simulate=simulate)]
    if as_json:  # the list CI bots read, as it always was; the totals on stderr as the text output says them
        click.echo(json.dumps([f.to_json() for f in findings], indent=2))
    else:
        for f in findings:
            click.echo(f.render())
    errors = sum(f.is_error for f in findings)
    click.echo(f"{count_of(len(result.loaded.recipes), 'recipe')}, {count_of(len(result.jobs), 'job')}: "
               f"{count_of(errors, 'error')}, {count_of(len(findings) - errors, 'warning')}", err=True)
    return 2 if has_errors(findings) else 0


def _fail(exc: LlmsweepError) -> int:
    click.echo(f"error: {exc}", err=True)
    return exc.exit_code


@click.command("rules")
@json_option("the list of rules")
def rules(as_json: bool) -> int:
    """List every schema, plan, policy and changelog rule with its id, severity, title, fix and evidence."""
    from llmsweep.policy import all_rules

    listed = all_rules()
    if as_json:
        click.echo(json.dumps([r.to_json() for r in listed], indent=2))
        return 0
    for r in listed:
        click.echo(f"{r.id}  [{r.severity.value}, {r.stage}]  {r.title}")
        click.echo(f"    fix: {r.fix}")
        if r.evidence:
            click.echo(f"    evidence: {r.evidence}")
    return 0


@click.command("schema")
@click.argument("subject", type=click.Choice(["recipe", "summary"]), default="recipe")
def schema(subject: str) -> int:
    """Print a JSON Schema (for editors and CI linters): SUBJECT `recipe` (default) or `summary` (summary.json)."""
    if subject == "summary":
        from llmsweep.metrics.model import json_schema

        click.echo(json.dumps(json_schema(), indent=2))
        return 0
    from llmsweep.spec import recipe_json_schema

    click.echo(json.dumps(recipe_json_schema(), indent=2))
    return 0
