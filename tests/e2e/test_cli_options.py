"""Every command's options, listed from the click tree: one spelling per concept, one concept per spelling.

Shared options are declared once in `llmsweep.cli.options`; these tests walk every command and subcommand the
`llmsweep` group lists and fail when a command spells a known concept a second way (`--config-key` beside
`--config-keys`), hand-writes an option whose spelling belongs to a shared concept, or when `--json` / `--seed`
mean something else somewhere.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import defaultdict
from pathlib import Path

import click
import pytest
from support.cli import walk
from test_run_support import cli_here

from llmsweep.cli.main import cli
from llmsweep.cli.options import CONCEPTS, Opt, describe, field_default

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart.yaml"

# Spellings that users met before one name was chosen, and the one spelling of their concept. No command may take
# them as options again (they live on only as hidden aliases that warn).
SECOND_SPELLINGS = {
    "--config-key": "--config-keys",
    "--timeout": "--request-timeout",
    "--workers": "--client-workers",
    "--warmup": "--num-warmups",
    "--warmups": "--num-warmups",
    "--warmups-per-conc": "--num-warmups-per-conc",
    "--prompts-per-conc": "--num-prompts-per-conc",
    "--num-requests": "--num-prompts",
    "--method": "--spec-method",
    "--k": "--spec-k",
    "--resummarise": "--resummarize",
    "--summarise": "--summarize",
    "--run-id": "--run",
    "--save-to": "--out",
    "--draft": "--with-draft",
    "--only-job": "--job",
    "--replace": "--force",
}

# Spellings several commands take by hand, each meaning that command's own thing; a new shared option goes to
# llmsweep.cli.options instead of this list.
COMMAND_LOCAL = {
    "--concurrency": "bench: one closed-loop level; peer crosscheck: a comma-separated list of levels",
    "--precision": "matrix: a filter; al and sim: the precision served",
    "--port": "render: the port in the rendered command; sim serve: the port to bind",
    "--isl": "input tokens of the bench or cross-check prompts",
    "--osl": "output tokens of the bench or cross-check requests",
}

# Client-load seeds: the commands whose --seed draws prompts and arrivals, as a recipe's client seed does.
CLIENT_SEED_COMMANDS = {"bench fixed", "bench agentic", "bench replay", "peer crosscheck"}


def _options() -> list[tuple[str, click.Option]]:
    return [(path, p) for path, command in walk(cli) for p in command.params
            if isinstance(p, click.Option) and path and p.name != "help"]


def _long(option: click.Option) -> list[str]:
    return [o for o in (*option.opts, *option.secondary_opts) if o.startswith("--")]


def _normal(spelling: str) -> str:
    """A spelling with plurals, British -ise and the qualifiers one concept was spelt with and without, removed."""
    words = spelling.removeprefix("--").lower().replace("summaris", "summariz").split("-")
    words = [w for w in words if w not in {"spec", "request", "client"}]
    return "-".join(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words)


OPTIONS = _options()


def test_the_walk_sees_every_command() -> None:
    commands = {path for path, _ in OPTIONS}
    assert {"run", "predict", "bench fixed", "catalog", "catalog hardware", "peer table", "traces synth"} <= commands


def test_no_command_takes_a_second_spelling_of_a_concept() -> None:
    offenders = [f"llmsweep {path} {s} (use {SECOND_SPELLINGS[s]})"
                 for path, opt in OPTIONS for s in _long(opt) if s in SECOND_SPELLINGS]
    assert not offenders, offenders


def test_near_identical_spellings_are_one_concept() -> None:
    by_normal: dict[str, set[str]] = defaultdict(set)
    for _, opt in OPTIONS:
        for s in _long(opt):
            by_normal[_normal(s)].add(s)
    clashes = {k: sorted(v) for k, v in by_normal.items() if len(v) > 1}
    assert not clashes, f"one concept, several spellings: {clashes}"


def test_a_shared_spelling_is_declared_once() -> None:
    """A spelling of a shared concept is only ever taken through llmsweep.cli.options, with that concept."""
    spelling_of = {c.spelling: name for name, c in CONCEPTS.items()}
    assert len(spelling_of) == len(CONCEPTS), "two concepts share a spelling"
    wrong = [f"llmsweep {path} {s}: hand-written, or another concept ({getattr(opt, 'concept', None)})"
             for path, opt in OPTIONS for s in _long(opt)
             if s in spelling_of and getattr(opt, "concept", None) != spelling_of[s]]
    assert not wrong, wrong


def test_a_spelling_several_commands_take_by_hand_is_named_as_command_local() -> None:
    families: dict[str, set[str]] = defaultdict(set)
    for path, opt in OPTIONS:
        if getattr(opt, "concept", None) is None and not opt.hidden:
            for s in _long(opt):
                families[s].add(path.split()[0])
    shared = {s: sorted(f) for s, f in families.items() if len(f) > 1 and s not in COMMAND_LOCAL}
    assert not shared, f"declare these once in llmsweep.cli.options: {shared}"


def test_old_spellings_are_hidden_and_clash_with_nothing() -> None:
    for path, opt in OPTIONS:
        if not isinstance(opt, Opt):
            continue
        visible = {s for _, o in OPTIONS for s in _long(o)}
        own = {s for o in cli_params(path) for s in _long(o)}
        for old in opt.old_spellings:
            assert old not in own, f"llmsweep {path}: {old} is both an option and an old spelling"
            if old in visible:  # allowed only where the old spelling was a second spelling of another concept
                assert (path, old) in OLD_SPELLING_OF_ANOTHER, (path, old)


OLD_SPELLING_OF_ANOTHER = {
    ("traces synth", "--traces"): "its --num-traces; elsewhere --traces is the trace source",
    ("model synth", "--draft-model"): "its --with-draft flag; elsewhere --draft-model is the drafter (al lookup)",
}


def cli_params(path: str) -> list[click.Option]:
    return [o for p, o in OPTIONS if p == path]


def test_every_json_is_a_flag_that_prints_json() -> None:
    jsons = [(path, opt) for path, opt in OPTIONS if "--json" in opt.opts]
    assert len(jsons) > 20
    for path, opt in jsons:
        assert opt.is_flag and opt.name == "as_json" and getattr(opt, "concept", None) == "json", path
        assert opt.help and "JSON on stdout" in opt.help, (path, opt.help)


def test_every_seed_defaults_to_the_field_it_feeds() -> None:
    from llmsweep.client.config import RunOptions
    from llmsweep.spec.workload import ResolvedWorkload

    client_seed = field_default(RunOptions, "seed")
    assert client_seed == field_default(ResolvedWorkload, "seed"), "bench and run would draw different prompts"
    seeds = [(path, opt) for path, opt in OPTIONS if "--seed" in opt.opts]
    assert {path for path, _ in seeds} >= CLIENT_SEED_COMMANDS
    for path, opt in seeds:
        assert isinstance(opt, Opt) and (opt.type is click.INT or isinstance(opt.type, click.IntRange)), path
        if path in CLIENT_SEED_COMMANDS:
            assert opt.default == client_seed, (path, opt.default)
        source = getattr(opt, "source", None)
        if source is not None:
            assert opt.default == field_default(*source), (path, opt.default, source)
        else:
            assert path == "compare", f"llmsweep {path} --seed names no field it feeds"


def test_help_comes_from_the_field_description() -> None:
    from llmsweep.client.config import Endpoint, RunOptions

    helps = {(path, opt.opts[0]): opt.help for path, opt in OPTIONS}
    assert helps[("bench fixed", "--url")] == describe(Endpoint, "base_url")
    assert helps[("run", "--client-workers")] == describe(RunOptions, "workers")
    assert helps[("peer crosscheck", "--request-timeout")] == helps[("run", "--request-timeout")]


def llmsweep(*args: str) -> subprocess.CompletedProcess[str]:
    return cli_here(args, {**os.environ, "PYTHONPATH": str(REPO / "src")}, cwd=REPO)


def test_group_json_flag_holds_before_and_after_the_subcommand() -> None:
    before, after = llmsweep("catalog", "--json", "hardware"), llmsweep("catalog", "hardware", "--json")
    assert before.returncode == after.returncode == 0, before.stderr + after.stderr
    assert json.loads(before.stdout) == json.loads(after.stdout)
    assert any(h["id"] == "h200" for h in json.loads(before.stdout))


def test_predict_takes_config_keys() -> None:
    key = "qwen3.5-fp8-mi300x-sim-agentic-mtp"
    out = llmsweep("predict", str(QUICKSTART), "--config-keys", key, "--duration", "3", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout), "no predicted job"
    missing = llmsweep("predict", str(QUICKSTART), "--config-keys", "no-such-key", "--duration", "3")
    assert missing.returncode == 2 and "no-such-key" in missing.stderr


def test_predict_table_heads_its_throughputs_as_the_metric_table_and_shows_the_json_values() -> None:
    from llmsweep.metrics.registry import HOT_BY_NAME

    key = "qwen3.5-fp8-mi300x-sim-agentic-mtp"
    doc = json.loads(llmsweep("predict", str(QUICKSTART), "--config-keys", key, "--duration", "3", "--json").stdout)
    table = llmsweep("predict", str(QUICKSTART), "--config-keys", key, "--duration", "3")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    header = next(line for line in lines if "calibration" in line)
    total, output = HOT_BY_NAME["tput_per_gpu"].header, HOT_BY_NAME["output_tput_per_gpu"].header
    assert total in header and output in header and header.index(total) < header.index(output)
    for row in doc:
        per_gpu = row["summary"]["throughput"]["per_gpu"]
        cells = next(line for line in lines if f" {row['conc']} " in line and row["job"][:20] in line)
        # as every table prints the metric (`HotColumn.cell`)
        assert HOT_BY_NAME["tput_per_gpu"].cell(per_gpu["total_tps"]) in cells
        assert HOT_BY_NAME["output_tput_per_gpu"].cell(per_gpu["output_tps"]) in cells


@pytest.mark.parametrize(("old", "new"), [(["--method", "mtp", "--k", "3"], ["--spec-method", "mtp", "--spec-k", "3"])])
def test_an_old_spelling_still_works_and_warns_once(old: list[str], new: list[str]) -> None:
    was, now = llmsweep("al", "qwen3.5", *old, "--json"), llmsweep("al", "qwen3.5", *new, "--json")
    assert was.returncode == now.returncode == 0, was.stderr
    assert json.loads(was.stdout) == json.loads(now.stdout)
    assert re.findall(r"warning: --method is now --spec-method", was.stderr) == [
        "warning: --method is now --spec-method"]
    assert "is now" not in now.stderr
    repeated = llmsweep("predict", str(QUICKSTART), "--config-key", "nope-a", "--config-key", "nope-b")
    assert repeated.returncode == 2 and repeated.stderr.count("--config-key is now --config-keys") == 1


def test_run_and_bench_share_the_client_defaults_the_lifecycle_applies() -> None:
    """`run --request-timeout` / `--client-workers` feed LifecycleSettings: the CLI and the API default alike."""
    from llmsweep.execute.lifecycle import LifecycleSettings

    defaults = {(path, opt.opts[0]): opt.default for path, opt in OPTIONS}
    assert defaults[("run", "--request-timeout")] == field_default(LifecycleSettings, "request_timeout_s")
    assert defaults[("run", "--request-timeout")] == defaults[("bench fixed", "--request-timeout")]
    assert defaults[("run", "--client-workers")] == field_default(LifecycleSettings, "client_workers")


def test_a_prompt_count_below_one_is_refused_as_a_bad_option() -> None:
    """`bench fixed --num-prompts 0` ended in a pydantic traceback: the option takes what the workload's field does."""
    from click.testing import CliRunner

    from llmsweep.cli.main import cli

    res = CliRunner().invoke(cli, ["bench", "fixed", "--url", "http://127.0.0.1:9", "--model", "m", "--isl", "8",
                                   "--osl", "8", "--num-prompts", "0"])
    assert res.exit_code == 2 and "Invalid value for '--num-prompts': 0 is not in the range x>=1" in res.output, \
        res.output


def test_every_number_option_refuses_nan_and_inf_and_its_fields_bounds_when_parsed() -> None:
    """A float option took `nan` and `inf` (a request timeout of inf, a simulated TTFT of inf that never ends), and a
    bound only the model field checked came back as a pydantic traceback after the command had started (`run
    --request-timeout 0`, `--al-tolerance -1`)."""
    from llmsweep.cli.options import FiniteRange, field_range

    loose = [f"{path} {option.opts[0]}" for path, option in OPTIONS
             if isinstance(option.type, click.types.FloatParamType) and not isinstance(option.type, FiniteRange)]
    assert not loose, f"float options that take nan/inf: {loose}"
    unbounded = [f"{path} {option.opts[0]}" for path, option in OPTIONS  # feeds a bounded field, takes any number
                 if (source := getattr(option, "source", None)) is not None
                 and isinstance(field_range(source, None), (click.FloatRange, click.IntRange))
                 and not isinstance(option.type, (click.FloatRange, click.IntRange))]
    assert not unbounded, f"options whose model field is bounded but which take any number: {unbounded}"


@pytest.mark.parametrize(("argv", "said"), [
    (["run", str(QUICKSTART), "--request-timeout", "0"], "'--request-timeout': 0.0 is not in the range x>0"),
    (["run", str(QUICKSTART), "--al-tolerance", "-1"], "'--al-tolerance': -1.0 is not in the range x>=0"),
    (["run", str(QUICKSTART), "--startup-timeout", "nan"], "'--startup-timeout': 'nan' is not a finite number"),
    (["sim", "serve", "--ttft-ms", "inf"], "'--ttft-ms': 'inf' is not a finite number"),
])
def test_an_out_of_range_number_is_refused_as_parsed_not_as_a_traceback(argv: list[str], said: str) -> None:
    from click.testing import CliRunner

    res = CliRunner().invoke(cli, argv)
    assert res.exit_code == 2 and said in res.stderr, (res.exit_code, res.output)
