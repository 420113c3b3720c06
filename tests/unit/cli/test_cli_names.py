"""One name per concept on the command line, checked over the click tree so a command added later is held to it:
each concept has one spelling in every command, the spellings users knew before still work (hidden, saying once on
stderr what they are now), every list option takes its values one convention's way, and a command that writes a
file or folder the user names refuses one that holds results unless --force, leaving its bytes as they were.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import click
import pytest
from support.cli import run_main, walk

from llmsweep import option_kit
from llmsweep.cli import options
from llmsweep.cli.main import cli
from llmsweep.cli.options import CONCEPTS, LISTED_HELP, Opt, renamed

REPO = Path(__file__).resolve().parents[3]
FIXED = REPO / "tests" / "data" / "recipes" / "run" / "fixed-sim.yaml"
AIPERF_OK = REPO / "tests" / "data" / "aiperf" / "ok"
AL_RECIPE = REPO / "tests" / "data" / "recipes" / "alcollect" / "llama-1b-ngram.yaml"
V3_STORE = REPO / "tests" / "data" / "stores" / "v3-results.sqlite"

# concept → its one spelling, and the spellings it had before one was chosen (hidden aliases that say what it is now)
CANONICAL: dict[str, tuple[str, tuple[str, ...]]] = {
    "run_id": ("--run", ("--run-id",)),  # `results list --run`, `ci collect --run-id`
    "out": ("--out", ("--save-to",)),  # every command's output; `sim calibrate --save-to`
    "draft_model": ("--draft-model", ()),  # `al lookup --draft-model`, a recipe's `draft-model`
    "job": ("--job", ("--only-job",)),  # `render --job`, `run --only-job`
    "force": ("--force", ("--replace",)),  # `results ingest --replace`
    "config_keys": ("--config-keys", ("--config-key",)),
    "request_timeout": ("--request-timeout", ("--timeout",)),
    "client_workers": ("--client-workers", ("--workers",)),
    "num_prompts_per_conc": ("--num-prompts-per-conc", ("--prompts-per-conc",)),
    "num_warmups": ("--num-warmups", ("--warmup", "--warmups")),  # `bench fixed --warmup`, `peer import --warmups`
    "num_warmups_per_conc": ("--num-warmups-per-conc", ("--warmups-per-conc",)),
    "resummarize": ("--resummarize", ("--resummarise",)),
}
# Spellings that name another concept too, so they cannot be a hidden alias everywhere: the alias lives on the one
# command that used it (`traces synth --traces` is its --num-traces; elsewhere --traces is the trace source).
COMMAND_ALIASES = {("traces synth", "--traces"): "--num-traces", ("al lookup", "--method"): "--spec-method",
                   ("al lookup", "--k"): "--spec-k",
                   # model synth's flag that also writes a drafter: --draft-model is the drafter itself elsewhere
                   ("model synth", "--draft"): "--with-draft", ("model synth", "--draft-model"): "--with-draft"}

# One spelling whose options take a different shape in some commands (a flag, one value, a list), and why.
SHAPES_DIFFER = {
    "--concurrency": "bench: the one level it loads; peer crosscheck: the levels it walks",
    "--job": "render: the one job it renders; run: the jobs it runs",
    "--precision": "matrix full-sweep: InferenceX's filter (several); elsewhere the precision served",
    "--spec-k": "al collect: the draft lengths it measures; al lookup, sim serve: the one draft length",
    "--thinking": "al collect: the modes it measures; al lookup: the curve's one mode",
}

# List options repeated only, not split at commas: a value may itself hold a comma.
REPEAT_ONLY = {
    "--config-files": "a path",
    "--executor-option": "KEY=VALUE, the value YAML (`node={srun: a, b: c}`)",
    "--chat-template-kwargs": "MODE=JSON",
    "--sampling": "MODE=KEY=VALUE,… (commas separate its own settings)",
    "--note": "free text",
    "--curves": "a path",
    "--label": "a pull-request label (GitHub allows commas in one)",
    "--with": "a run folder or id",
    "--repeats-from": "a run folder or id",
    "--b-repeats-from": "a run folder or id",
    "--hold-out": "a shell-style pattern over point labels",
}

# Commands that write what --out names: those that refuse one holding results unless --force (or always), and
# those whose purpose is to write it anew (derived files, regenerated each time), with why.
OUT_REFUSES = {"run", "bench agentic", "bench fixed", "bench replay", "predict", "peer crosscheck", "peer import",
               "results export", "model import", "model synth", "al collect", "discover", "ci collect"}
OUT_REWRITES = {
    "report": "the dashboard of RUN, derived from its results: written anew each time",
    "traces synth": "a synthetic corpus, a pure function of its options (--seed, --num-traces, --max-isl)",
    "ci github": "the workflow generated from the recipes: regenerated when they change",
    "sim calibrate": "merges the fitted entries into a calibration file, replacing those of the same key (documented)",
}

COMMANDS = dict(walk(cli))
OPTIONS = [(path, p) for path, c in COMMANDS.items() for p in c.params
           if isinstance(p, click.Option) and p.name != "help"]


def _long(option: click.Option) -> list[str]:
    return [o for o in (*option.opts, *option.secondary_opts) if o.startswith("--")]


def test_the_table_is_the_one_options_declares() -> None:
    for concept, (spelling, old) in CANONICAL.items():
        assert CONCEPTS[concept].spelling == spelling, concept
        assert set(old) <= set(CONCEPTS[concept].deprecated), (concept, CONCEPTS[concept].deprecated)


def test_every_command_spells_a_concept_its_one_way() -> None:
    """Two commands spelt one concept two ways (`results list --run`, `ci collect --run-id`; `render --job`, `run
    --only-job`; `--out`, `sim calibrate --save-to`; `al lookup --draft-model`, `model synth --draft`; `--force`,
    `results ingest --replace`): an old spelling no command takes as its own, and each concept's option is declared
    through `options.option`, so it carries the one spelling."""
    old = {s: spelling for spelling, olds in CANONICAL.values() for s in olds}
    taken = [f"llmsweep {path} {s} (the concept's spelling is {old.get(s) or COMMAND_ALIASES[path, s]})"
             for path, opt in OPTIONS for s in _long(opt) if s in old or (path, s) in COMMAND_ALIASES]
    assert not taken, taken
    concept_of = {c.spelling: name for name, c in CONCEPTS.items()}
    astray = [f"llmsweep {path} {opt.opts[0]}" for path, opt in OPTIONS
              if ((concept := getattr(opt, "concept", None)) is not None and opt.opts[0] != CONCEPTS[concept].spelling)
              or (opt.opts[0] in concept_of and getattr(opt, "concept", None) != concept_of[opt.opts[0]])]
    assert not astray, f"options that spell a concept by hand, or another concept's way: {astray}"


def _shape(option: click.Option) -> str:
    return "flag" if option.is_flag else "list" if option.multiple else "one"


def test_one_spelling_takes_one_shape_or_says_why() -> None:
    shapes: dict[str, set[str]] = {}
    for _, opt in OPTIONS:
        for s in _long(opt):
            shapes.setdefault(s, set()).add(_shape(opt))
    differ = {s for s, kinds in shapes.items() if len(kinds) > 1}
    assert differ == set(SHAPES_DIFFER), (f"a spelling that is a flag, one value or a list by command: say why in "
                                          f"SHAPES_DIFFER, or make it one: {sorted(differ - set(SHAPES_DIFFER))}; "
                                          f"no longer differ: {sorted(set(SHAPES_DIFFER) - differ)}")


def _sample(option: click.Option) -> list[str]:
    """Arguments that give `option` a value its type takes (the parser itself converts nothing)."""
    if option.is_flag or option.count:
        return []
    if isinstance(option.type, click.Choice):
        return [str(option.type.choices[0])]
    return ["2"]


ALIASES = sorted({(path, old, opt.opts[0]) for path, opt in OPTIONS if isinstance(opt, Opt)
                  for old in opt.old_spellings})


def test_draft_model_is_the_drafter_in_every_command() -> None:
    """`--draft-model` was `al lookup`'s drafter (HF id, variant or curve id, as a recipe's `draft-model`) and `model
    synth`'s flag that also writes a draft model: one spelling, two meanings. It takes a drafter wherever it is an
    option; model synth's flag is `--with-draft`, its old spellings warning what they are now."""
    takers = [(path, opt) for path, opt in OPTIONS if "--draft-model" in _long(opt)]
    assert takers and all(getattr(opt, "concept", None) == "draft_model" and not opt.is_flag for _, opt in takers)
    synth = next(opt for opt in COMMANDS["model synth"].params if opt.name == "draft")
    assert isinstance(synth, Opt) and synth.opts == ["--with-draft"] and synth.is_flag
    assert {"--draft-model", "--draft"} <= set(synth.old_spellings)


def test_every_duration_is_one_window_concept() -> None:
    """`discover --duration` was a whole number (click.IntRange) where every other `--duration` took any finite
    number of seconds above 0: each is the `duration` concept, a finite positive number (discover keeps its recipe's
    upper bound)."""
    durations = {path: opt for path, opt in OPTIONS if "--duration" in _long(opt)}
    assert {"bench fixed", "bench agentic", "bench replay", "predict", "discover"} <= set(durations)
    for path, opt in durations.items():
        assert getattr(opt, "concept", None) == "duration" and opt.metavar == "SECONDS", path
        assert isinstance(opt.type, options.FiniteRange) and opt.type.min == 0 and opt.type.min_open, path


@pytest.mark.parametrize(("given", "taken"), [("60", 60), ("60.0", 60)])
def test_discover_takes_its_window_as_a_number_of_seconds(given: str, taken: int) -> None:
    ctx = COMMANDS["discover"].make_context("discover", [str(FIXED), "--duration", given])
    assert ctx.params["duration"] == taken and isinstance(ctx.params["duration"], int)  # the stage recipes' int


def test_discover_refuses_a_window_its_stage_recipes_cannot_hold_as_parsed(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(capsys, "discover", FIXED, "--simulate", "--duration", "2.5", "--out", tmp_path / "d")
    assert code == 2 and "'--duration': 2.5 is not a whole number of seconds" in err and "Traceback" not in err, err
    assert not (tmp_path / "d").exists()


def test_every_renamed_spelling_is_covered() -> None:
    commands = {(path, old) for path, old, _ in ALIASES}
    assert {("ci collect", "--run-id"), ("sim calibrate", "--save-to"), ("model synth", "--draft"),
            ("model synth", "--draft-model"), ("run", "--only-job"), ("render", "--only-job"),
            # one concept's old spellings hold in every command that takes it (bench fixed had only --warmup)
            ("bench fixed", "--warmups"), ("peer import", "--warmup"),
            ("results ingest", "--replace")} <= commands
    assert set(COMMAND_ALIASES) <= commands


@pytest.mark.parametrize(("path", "old", "new"), ALIASES, ids=[f"{p} {o}" for p, o, _ in ALIASES])
def test_an_old_spelling_sets_its_option_and_says_once_what_it_is_now(path: str, old: str, new: str,
                                                                      capsys: pytest.CaptureFixture[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    command = COMMANDS[path]
    option = next(p for p in command.params if isinstance(p, click.Option) and p.opts[0] == new)
    monkeypatch.setattr(option_kit, "_WARNED", set())

    def parsed(*args: str) -> Any:
        values, _, _ = command.make_parser(click.Context(command)).parse_args(list(args))
        return values.get(option.name)

    value = _sample(option)
    assert parsed(new, *value) is not None and capsys.readouterr().err == ""
    assert parsed(old, *value, old, *value) == parsed(new, *value, new, *value)
    assert capsys.readouterr().err == renamed(old, new) + "\n"  # one line, however often it is given
    shown = {s for p in command.get_params(click.Context(command)) if not getattr(p, "hidden", False)
             for s in getattr(p, "opts", ())}
    assert new in shown and old not in shown  # --help lists the one spelling


def test_renamed_options_run_as_their_new_spelling(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole commands, the old spelling given as a user's script gives it: the same output, one line on stderr."""
    monkeypatch.setattr(option_kit, "_WARNED", set())
    ids = run_main(capsys, "matrix", "full-sweep", "--config-files", FIXED, "--format", "ids")[1].split()
    code, out, err = run_main(capsys, "run", FIXED, "--simulate", "--only-job", ids[0], "--out", tmp_path / "a" / "r",
                              "--no-report", "--store", tmp_path / "s.sqlite", "--json")
    assert code == 0 and [row["job"] for row in json.loads(out)["jobs"]] == [ids[0]], err
    assert err.count("warning: --only-job is now --job") == 1, err
    code, out, err = run_main(capsys, "ci", "collect", tmp_path / "a", "--out", tmp_path / "c",
                              "--run-id", "gh-7-1")
    assert json.loads((tmp_path / "c" / "run.json").read_text())["run_id"] == "gh-7-1", err
    assert "warning: --run-id is now --run" in err
    code, out, err = run_main(capsys, "results", "ingest", tmp_path / "a" / "r", "--replace", "--store",
                              tmp_path / "s.sqlite")
    assert code == 0 and "re-ingested" in out and "warning: --replace is now --force" in err, err


# -- lists: repeatable, commas also separate values -----------------------------------------------------------------

def test_every_list_option_takes_commas_or_says_why_not() -> None:
    """`peer crosscheck --concurrency` took one comma-separated string and `sim calibrate --factors` another, where
    every other list was a repeated option: each list option is now repeatable and splits a value at commas, unless
    its values may hold a comma (REPEAT_ONLY)."""
    lists = {(path, opt.opts[0]): opt for path, opt in OPTIONS if opt.multiple}
    loose = [f"{path} {name}" for (path, name), opt in lists.items()
             if not getattr(opt, "listed", False) and name not in REPEAT_ONLY]
    assert not loose, f"list options that do not split at commas (Opt(listed=True)) nor say why in REPEAT_ONLY: {loose}"
    split = [f"{path} {name}" for (path, name), opt in lists.items() if getattr(opt, "listed", False)
             and name in REPEAT_ONLY]
    assert not split, f"REPEAT_ONLY options that split at commas: {split}"
    for (path, name), opt in lists.items():
        if getattr(opt, "listed", False):
            assert opt.help and opt.help.endswith(LISTED_HELP), (path, name)
    one_string = [f"{path} {opt.opts[0]}" for path, opt in OPTIONS if not opt.multiple and not opt.is_flag
                  and "comma-separated" in (opt.help or "")]
    assert not one_string, f"a comma-separated list in one string (make it Opt(listed=True)): {one_string}"


@pytest.mark.parametrize(("path", "args", "name", "want"), [
    ("matrix test-config", ["--conc", "4,8", "--conc", "16"], "conc", ["4", "8", "16"]),
    ("matrix test-config", ["--conc", "4", "8", "16"], "conc", ["4", "8", "16"]),
    ("peer crosscheck", ["--concurrency", "1,8", "--concurrency", "32"], "levels", ["1", "8", "32"]),
    ("sim calibrate", ["--factors", "mem, step_s", "--factors", "compute"], "factors", ["mem", "step_s", "compute"]),
    ("al collect", ["-k", "1,2", "3"], "ks", ["1", "2", "3"]),
    ("run", ["--job", "a,b", "--only-job", "c"], "only_job", ["a", "b", "c"]),
    ("validate", ["--runner-label", "x:1,y:2"], "runner_labels", ["x:1", "y:2"]),
    ("run", ["--executor-option", "node={srun: a, b: c}"], "executor_options", ["node={srun: a, b: c}"]),
])
def test_a_list_takes_commas_repeats_and_inferencex_spaces(path: str, args: list[str], name: str,
                                                           want: list[str]) -> None:
    command = COMMANDS[path]
    values, _, _ = command.make_parser(click.Context(command)).parse_args(args)
    assert values[name] == want


def test_peer_crosscheck_levels_are_counted_as_parsed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_main(capsys, "peer", "crosscheck", "--url", "http://127.0.0.1:9", "--model", "m",
                              "--tokenizer", "t", "--isl", "8", "--osl", "8", "--concurrency", "1,0",
                              "--out", tmp_path / "pc")
    assert code == 2 and "'--concurrency': 0 is not in the range x>=1" in err and not (tmp_path / "pc").exists()


# -- outputs: refused when they hold results, unless --force ---------------------------------------------------------

def test_every_command_writing_out_refuses_results_or_says_why_it_rewrites() -> None:
    writes = {path for path, opt in OPTIONS if "--out" in opt.opts}
    assert writes == OUT_REFUSES | set(OUT_REWRITES), (sorted(writes - OUT_REFUSES - set(OUT_REWRITES)),
                                                       sorted(OUT_REFUSES | set(OUT_REWRITES) - writes))
    without = [path for path in OUT_REFUSES if "force" not in {p.name for p in COMMANDS[path].params}]
    assert sorted(without) == ["ci collect", "discover"]  # they refuse a used --out always: it is never resumed


def _fingerprint(path: Path) -> dict[str, str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "store.sqlite"
    shutil.copy(V3_STORE, path)
    monkeypatch.setenv("LLMSWEEP_STORE", str(path))
    return path


def _predict(out: Path, *extra: str) -> list[str]:
    return ["predict", str(FIXED), "--max-requests", "3", "--processes", "1", "--out", str(out), *extra]


def _peer_import(out: Path, *extra: str) -> list[str]:
    return ["peer", "import", str(AIPERF_OK), "--out", str(out), "--num-warmups", "4", "--served-by", "simulated",
            *extra]


def _export(out: Path, *extra: str) -> list[str]:
    return ["results", "export", "--out", str(out), *extra]


def _crosscheck(out: Path, *extra: str) -> list[str]:
    return ["peer", "crosscheck", "--url", "http://127.0.0.1:9", "--model", "m", "--tokenizer", "t", "--isl", "8",
            "--osl", "8", "--concurrency", "1", "--out", str(out), *extra]


@pytest.mark.parametrize(("argv", "out_name", "forced_code"), [
    (_predict, "p", 0), (_peer_import, "pi", 0), (_export, "export.json", 0), (_crosscheck, "pc", None),
], ids=["predict", "peer import", "results export", "peer crosscheck"])
def test_an_output_holding_results_is_refused_untouched_unless_force(
        argv: Any, out_name: str, forced_code: int | None, store: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`predict --out`, `peer import --out`, `peer crosscheck --out` and `results export --out` wrote over the
    results an earlier run had left there without a word (bench, run and al collect refused without --force)."""
    out = tmp_path / out_name
    if out.suffix:  # a file: an earlier export
        out.write_text('{"format": "llmsweep-results", "results": ["earlier"]}\n')
    else:  # a folder: an earlier run's point, as predict, peer import and crosscheck leave them
        (out / "c1" / "llmsweep-0").mkdir(parents=True)
        for name in ("records.jsonl", "summary.json", "run.json"):
            (out / "c1" / "llmsweep-0" / name).write_text(f"earlier {name}\n")
        (out / "crosscheck.json").write_text("{}\n")
    before = _fingerprint(out)
    code, stdout, err = run_main(capsys, *argv(out))
    assert code == 2 and "already holds" in err and "--force" in err and stdout == "", err
    assert "Traceback" not in err and _fingerprint(out) == before
    code, stdout, err = run_main(capsys, *argv(out, "--force"))
    assert "already holds" not in err
    if forced_code is not None:
        assert code == forced_code and _fingerprint(out) != before, err


def test_an_empty_output_is_no_result_to_refuse(store: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "p").mkdir()
    assert run_main(capsys, *_export(tmp_path / "empty.json"))[0] == 0
    assert json.loads((tmp_path / "empty.json").read_text())["format"] == "llmsweep-results"
    assert run_main(capsys, *_predict(tmp_path / "p"))[0] == 0


def test_al_collect_refuses_a_run_dir_holding_the_evidence_of_its_cells(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`al collect --run-dir DIR` wrote each cell's evidence (server log, /metrics, records) over the evidence an
    earlier collection had left there for the same cell, while its curve file was guarded by --force."""
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    evidence = tmp_path / "evidence"
    cells = ["al", "collect", str(AL_RECIPE), "--simulate", "--prompts", "builtin", "--num-prompts", "1",
             "--output-len", "64", "--run-dir", str(evidence)]
    args = [*cells, "--out", str(tmp_path / "al")]
    code, _, err = run_main(capsys, *args, "-k", "1")
    assert code == 0 and (evidence / "thinking_off-k1").is_dir(), err
    (curve,) = (tmp_path / "al").glob("*.yaml")  # (beside it, the lock file of the folder's claim)
    before = _fingerprint(evidence)
    code, _, err = run_main(capsys, *args, "-k", "1", "--variant", "again")
    assert code == 2 and "already holds evidence of these cells (thinking_off-k1)" in err and "--force" in err, err
    assert _fingerprint(evidence) == before and list((tmp_path / "al").glob("*.yaml")) == [curve]
    code, _, err = run_main(capsys, *cells, "-k", "1", "--merge-into", str(curve))  # no --force to give there
    assert code == 2 and "pass a new --run-dir, or leave it out" in err and _fingerprint(evidence) == before, err
    assert run_main(capsys, *args, "-k", "2", "--variant", "k2")[0] == 0  # another cell replaces nothing
    code, _, err = run_main(capsys, *args, "-k", "1", "--variant", "again", "--force")
    assert code == 0 and (tmp_path / "al" / curve.name.replace(".yaml", "_again.yaml")).exists(), err
