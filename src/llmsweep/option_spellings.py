"""The spelling of every CLI option concept (`cli.options.CONCEPTS`), defined once, below every room.

The CLI declares its shared options from here (`cli.options` builds each concept's option with its spelling), and a
room below the CLI that writes a command line for a person or a machine to run reads the spelling from here too, so
neither restates it and neither imports the CLI: dependencies point down, and the CLI sits at the top. This module
imports nothing. Those that do: `changes.github`'s workflow, matrix and fixes, `changes.reuse`, the executors' fixes
and worker command (`execute.docker`, `.executor`, `.local`, `.preflight`, `.slurm`), the run's messages
(`execute.pipeline`, `.lifecycle`, `.roles`, `.placement`), the report's and results' fixes, and the simulator's own
command line (`sim.serve_args`); `tests/unit/test_option_spellings.py` fails on a spelling one of them writes by
hand. A command's own option that a lower room names is a concept here too (`run --resume`, `--reuse`, `--live`); a
few such flags are still written by hand (`matrix full-sweep --format ids`, `run --eval-limit`, `compare
--repeats-from`), and the same test holds every flag those fixes name to an option some llmsweep command takes;
`tests/unit/test_command_flags.py` holds each flag a message names with its command to that command's options. A
flag of another tool that happens to share a spelling (`docker run --gpus`) is that tool's, not read from here.

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
}
"""Concept name -> its one long spelling. `cli.options.CONCEPTS` has exactly these keys (checked on import)."""


def flag(concept: str) -> str:
    """The spelling of the shared option `concept` (a key of :data:`SPELLINGS`)."""
    return SPELLINGS[concept]
