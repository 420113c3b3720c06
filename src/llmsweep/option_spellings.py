"""The spelling of every CLI option concept (`cli.options.CONCEPTS`), defined once, below every room.

The CLI declares its shared options from here (`cli.options` builds each concept's option with its spelling), and a
room below the CLI that writes a command line for a person or a machine to run reads the spelling from here too, so
neither restates it and neither imports the CLI: dependencies point down, and the CLI sits at the top. This module
imports nothing. Those that do: `changes.github`'s workflow, matrix and fixes, `changes.reuse`, the executors' fixes
and worker command (`execute.docker`, `.executor`, `.local`, `.preflight`, `.slurm`), the run's messages
(`execute.pipeline`, `.lifecycle`, `.roles`, `.placement`), the power sampler's fixes (`power.sampler`, `.samples`,
`.virtual`), the report's and results' fixes, and the simulator's own command line (`sim.serve_args`);
`tests/unit/test_option_spellings.py` fails on a spelling one of them writes by hand. A command's own option that a
lower room names is a concept here too (`run --resume`, `run --reuse`, `run --live`, `run --eval-limit`,
`run --require-power`, `run --power-backend`; `compare --repeats-from`), as is one several commands take that fixes
name (`--format`, `--config-files`, read by `plan.select`, `evals`, `results.interchange`). An on/off pair
(`run --require-power` and `--no-require-power`) is one spelling here, its off form derived (:data:`SWITCHES`,
:func:`negation`), as the CLI declares the pair from it. A single-command flag that one message names is still written
by hand, with its command (`run --al-tolerance`, `compare: --ignore`, `peer import --served-by`, `report --with`):
`tests/unit/test_option_spellings.py` holds every flag those fixes name to an option some llmsweep command takes, and
`tests/unit/test_command_flags.py` each flag a message names with its command (`llmsweep report RUN --with`) to that
command's options. A flag of another tool that happens to share a spelling (`docker run --gpus`, `docker inspect
--format`) is that tool's, not read from here.

Only the current spellings live here; an old spelling a concept still takes as a hidden alias (`Concept.deprecated`)
is the CLI's own business, as are an option's type, default and help.
"""

from __future__ import annotations

from typing import Final

SPELLINGS: Final[dict[str, str]] = {
    "json": "--json",
    "config_keys": "--config-keys",
    "runner_config": "--runner-config",
    "runner_labels": "--runner-label",
    "allowance_minutes": "--allowance-minutes",
    "store": "--store",
    "no_evals": "--no-evals",
    "evals_only": "--evals-only",
    "all_evals": "--all-evals",
    "changed": "--changed",
    "baseline": "--baseline",
    "simulate": "--simulate",
    "mix_sources": "--mix-sources",
    "url": "--url",
    "model": "--model",
    "tokenizer": "--tokenizer",
    "no_ignore_eos": "--no-ignore-eos",
    "gpus": "--gpus",
    "request_timeout": "--request-timeout",
    "client_workers": "--client-workers",
    "seed": "--seed",
    "num_prompts": "--num-prompts",
    "num_warmups": "--num-warmups",
    "num_prompts_per_conc": "--num-prompts-per-conc",
    "num_warmups_per_conc": "--num-warmups-per-conc",
    "duration": "--duration",
    "num_traces": "--num-traces",
    "traces": "--traces",
    "spec_method": "--spec-method",
    "spec_k": "--spec-k",
    "executor": "--executor",
    "executor_option": "--executor-option",
    "startup_timeout": "--startup-timeout",
    "repeats": "--repeats",
    "force": "--force",
    "out": "--out",
    "run_id": "--run",
    "job": "--job",
    "draft_model": "--draft-model",
    "pr_number": "--pr-number",
    "changelog_base": "--base",
    "processes": "--processes",
    "resummarize": "--resummarize",
    "bind_host": "--host",
    "kv_transfer": "--kv-transfer",
    "prefill_urls": "--prefill",
    "decode_urls": "--decode",
    # `run`'s own, which the run's messages and fixes name (`execute.pipeline`, `.lifecycle`, `results.rundir`)
    "live": "--live",
    "resume": "--resume",
    "reuse": "--reuse",
    "eval_task": "--eval-task",
    "eval_dataset": "--eval-dataset",
    "eval_limit": "--eval-limit",
    "eval_max_tokens": "--eval-max-tokens",
    "require_power": "--require-power",  # a switch: `--no-require-power` too (:data:`SWITCHES`)
    "power_backend": "--power-backend",
    # the recipe files of `matrix full-sweep` and `matrix test-config`, which the job-id fixes name
    "config_files": "--config-files",
    # `compare`'s further runs of each side, which its notes name (`results.compare`)
    "repeats_from": "--repeats-from",
    "b_repeats_from": "--b-repeats-from",
    # the output format of a command (each command its own choices: `matrix`, `render`, `results export`, `compare`)
    "format": "--format",
}
"""Concept name -> its one long spelling. `cli.options.CONCEPTS` has exactly these keys (checked on import)."""

SWITCHES: Final[frozenset[str]] = frozenset({"require_power"})
"""The concepts declared as an on/off pair (`run --require-power/--no-require-power`): the off spelling is derived from
the one spelling above (:func:`negation`), never written a second time."""


def flag(concept: str) -> str:
    """The spelling of the shared option `concept` (a key of :data:`SPELLINGS`)."""
    return SPELLINGS[concept]


def negation(concept: str) -> str:
    """The off spelling of the switch `concept` (a key of :data:`SWITCHES`): `--no-` before its spelling's name."""
    if concept not in SWITCHES:
        raise KeyError(f"{concept!r} is no switch: it has no --no- spelling")
    return "--no-" + SPELLINGS[concept].removeprefix("--")
