"""The command-line contracts every command keeps, checked over the click tree so that a command added later is held
to them without a line here: a command that prints a table has `--json` (or says here why it prints none); a required
option is asked for; a port is a port and a count is bounded where the option is parsed; bad input is exit 2 naming
the option or file, never a traceback; and work on a whole store or file that runs long says what it is doing on
stderr, stdout left to the document.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import pytest
from support.cli import run_main, walk

from llmsweep.cli.main import cli
from llmsweep.cli.options import PathValue
from llmsweep.words import count_of

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "examples" / "quickstart.yaml"
V3_STORE = REPO / "tests" / "data" / "stores" / "v3-results.sqlite"

# Commands that print no table, and so no --json: what they print instead. A command not listed here must take --json.
NO_JSON = {
    "schema": "prints a JSON Schema: JSON is all it prints",
    "matrix full-sweep": "prints InferenceX's JSON matrix (--format matrix|jobs|ids)",
    "matrix test-config": "prints InferenceX's JSON matrix (--format matrix|jobs|ids)",
    "traces synth": "writes a JSONL corpus and one line on stderr",
    "sim serve": "a server: no table",
    "sim router": "a server: no table",
    "router": "a server: no table",
    "results export": "writes an export (--format json is ours, lossless)",
    "results import": "one line: the runs it stored",
    "results ingest": "one line per run stored",
    "ci collect": "writes a run folder and one line per job it could not collect",
    "ci github": "writes a workflow file and prints its path",
    "ci matrix": "prints the GitHub Actions matrix as JSON",
}

# Integer options that take any integer, and why; every other integer option is bounded as it is parsed.
UNBOUNDED_INTS = {
    "--seed": "a seed: any integer draws a corpus",
    "matrix full-sweep --step-size": "InferenceX's own check, with its message (`--step-size must be greater than 1`)",
    "al collect --top-k": "-1 is `off`; the sampling model refuses the rest, naming --top-k (exit 2)",
}


COMMANDS = dict(walk(cli))
LEAVES = sorted(path for path, c in COMMANDS.items() if path and not isinstance(c, click.Group))
OPTIONS = [(path, p) for path, c in COMMANDS.items() for p in c.params if isinstance(p, click.Option)]


def test_the_walk_sees_every_command() -> None:
    assert {"validate", "run", "predict", "results export", "sim serve", "peer crosscheck", "ci matrix",
            "changelog canonicalize"} <= set(LEAVES)
    stale = set(NO_JSON) - set(LEAVES)
    assert not stale, f"NO_JSON names commands that no longer exist: {stale}"


@pytest.mark.parametrize("path", LEAVES)
def test_a_command_has_json_unless_it_prints_no_table(path: str) -> None:
    opts = {o for p in COMMANDS[path].params for o in getattr(p, "opts", ())}
    if path in NO_JSON:
        assert "--json" not in opts, f"llmsweep {path} has --json now: drop it from NO_JSON"
        return
    assert "--json" in opts, (f"llmsweep {path} takes no --json: give it one (`cli.options.json_option`), or add it "
                              "to NO_JSON saying what it prints instead of a table")


def test_a_required_option_has_no_default() -> None:
    """Click (8.3 on) takes an explicit `default=None` for a value given: a required option that kept its concept's
    None default was never asked for (`al lookup` without --spec-k ended in a traceback)."""
    loose = [f"llmsweep {path} {opt.opts[0]}" for path, opt in OPTIONS if opt.required and opt.default is None]
    assert not loose, f"required options click never asks for: {loose}"


def test_every_port_option_takes_only_a_port() -> None:
    ports = [(path, opt) for path, opt in OPTIONS if "--port" in opt.opts]
    assert {path for path, _ in ports} >= {"sim serve", "sim router", "render"}
    for path, opt in ports:
        assert isinstance(opt.type, click.IntRange), path
        assert opt.type.min is not None and opt.type.min >= 0 and opt.type.max == 65535, (path, opt.type)


def test_every_integer_option_is_bounded_as_parsed() -> None:
    """A count taken as any integer came back as a pydantic traceback after the command had started (`peer
    crosscheck --isl 0`), or was used as given (`matrix full-sweep --min-conc -1` printed a matrix, exit 0)."""
    loose = [f"{path} {opt.opts[0]}" for path, opt in OPTIONS
             if type(opt.type) is click.types.IntParamType and opt.opts[0] not in UNBOUNDED_INTS
             and f"{path} {opt.opts[0]}" not in UNBOUNDED_INTS]
    assert not loose, f"integer options that take any integer (bound them, or say why in UNBOUNDED_INTS): {loose}"


# Commands that take --runner-config but not --runner-label: they plan without refusing a label the runner file lacks.
LABELS_NOT_CHECKED = {
    "matrix full-sweep": "InferenceX's planner: an unknown label is a warning, the job keeps it",
    "matrix test-config": "InferenceX's planner: an unknown label is a warning, the job keeps it",
    "changes": "compares two plans; runs nothing",
    "changelog check": "lists the jobs a changelog selects; runs nothing",
}


def test_a_command_that_refuses_unknown_runner_labels_takes_runner_label() -> None:
    """`discover` and `al collect` refused a job whose label the runner file lacks (`fleet.unknown-label`) and took
    no --runner-label, the option `run`, `predict` and `validate` accept such a label with."""
    takes = {path: {o for p in c.params for o in getattr(p, "opts", ())} for path, c in COMMANDS.items()}
    missing = [path for path, opts in takes.items()
               if "--runner-config" in opts and "--runner-label" not in opts and path not in LABELS_NOT_CHECKED]
    assert not missing, f"take --runner-label (option `runner_labels`), or say why in LABELS_NOT_CHECKED: {missing}"


@pytest.mark.parametrize("command", [
    ["discover", "{recipe}", "--simulate", "--out", "{tmp}/d", "--ladder-top", "2", "--refine", "0", "--repeats", "2"],
    ["al", "collect", "{al_recipe}", "--simulate", "--prompts", "builtin", "--num-prompts", "1", "-k", "1",
     "--output-len", "64", "--out", "{tmp}/al"],
], ids=["discover", "al collect"])
def test_runner_label_lets_a_label_the_runner_file_lacks_run(command: list[str], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    label = "cluster:not-in-the-runner-file"
    recipes = {}
    for name, source in (("recipe", "run/fixed-sim.yaml"), ("al_recipe", "alcollect/llama-1b-ngram.yaml")):
        text = (REPO / "tests" / "data" / "recipes" / source).read_text()
        assert "\n  runner: " in text
        recipes[name] = tmp_path / f"{name}.yaml"
        recipes[name].write_text("\n".join(f"  runner: {label}" if line.startswith("  runner: ") else line
                                           for line in text.splitlines()))
    args = [a.format(tmp=tmp_path, **recipes) for a in command]
    code, _, err = run_main(capsys, *args)
    assert code == 2 and "[fleet.unknown-label]" in err, err
    code, _, err = run_main(capsys, *args, "--runner-label", label)
    assert code == 0 and "unknown-label" not in err, err


PEER = ["peer", "crosscheck", "--url", "http://127.0.0.1:9", "--model", "m", "--isl", "8", "--osl", "8",
        "--concurrency", "1", "--out", "{tmp}/pc"]

# argv ({tmp}: a fresh folder; {dir}: an empty folder in it; {empty}: an empty file in it), what stderr names
BAD_INPUT = [
    (["al", "lookup", "qwen3.5", "--spec-method", "mtp"], "Missing option '--spec-k'"),
    (["changelog", "canonicalize", "{empty}", "--pr-number", "3"], "Missing option '--base'"),
    (["changelog", "resolve-conflict", "{empty}"], "Missing option '--pr-number'"),
    (PEER, "Missing option '--tokenizer'"),
    ([*PEER, "--tokenizer", "t", "--isl", "0"], "'--isl': 0 is not in the range x>=1"),
    ([*PEER, "--tokenizer", "t", "--min-prompts", "0"], "'--min-prompts': 0 is not in the range x>=1"),
    ([*PEER, "--tokenizer", "t", "--num-prompts-per-conc", "0"], "'--num-prompts-per-conc': 0 is not in the range"),
    ([*PEER, "--tokenizer", "t", "--num-warmups-per-conc", "-1"], "'--num-warmups-per-conc': -1 is not in the range"),
    (["peer", "import", "{dir}", "--out", "{tmp}/pi", "--num-warmups", "-3", "--served-by", "measured"],
     "'--num-warmups': -3 is not in the range"),
    (["sim", "serve", "--port", "-1"], "'--port': -1 is not in the range 0<=x<=65535"),
    (["sim", "router", "--port", "70000", "--prefill", "http://a:1", "--decode", "http://b:1"],
     "'--port': 70000 is not in the range 0<=x<=65535"),
    (["sim", "serve", "--max-running-requests", "0"], "'--max-running-requests': 0 is not in the range x>=1"),
    (["matrix", "full-sweep", "--config-files", str(QUICKSTART), "--min-conc", "-1"],
     "'--min-conc': -1 is not in the range x>=1"),
    (["matrix", "full-sweep", "--config-files", str(QUICKSTART), "--max-tp", "0"], "'--max-tp': 0 is not in the range"),
    (["matrix", "test-config", "--config-files", str(QUICKSTART), "--config-keys", "qwen3.5*", "--conc", "0"],
     "'--conc': 0 is not in the range x>=1"),
    (["matrix", "full-sweep", "--config-files", "{dir}"], "no recipe in --config-files /"),
    (["matrix", "full-sweep", "--config-files", "{empty}"], "no recipe in --config-files /"),
    (["ci", "github", "{dir}", "--out", "{tmp}/.github/workflows/sweep.yml"], "the recipes expand to no job"),
    (["ci", "matrix", "{empty}"], "the recipes expand to no job"),
    (["compare", "{tmp}/a", "{tmp}/b", "--resamples", "1"], "'--resamples': 1 is not in the range x>=2"),
    (["compare", "{tmp}/a", "{tmp}/b", "--json", "--format", "markdown"], "--json and --format markdown"),
    (["changes", "HEAD..", "--repo", "{tmp}/nope"], "'--repo': Directory '"),
    (["render", str(QUICKSTART), "--job", "x", "--json", "--format", "sh"], "--json and --format sh"),
    (["al", "lookup", "qwen3.5", "--spec-method", "mtp", "--spec-k", "99"],  # named as --help spells them
     "Invalid value for --spec-method/--spec-k/--thinking: no golden AL for qwen3.5"),
    (["ci", "collect", "{dir}", "--out", "{tmp}/collected", "--run", "gh-1-1"], "holds no job's artifact"),
    # a path option given no path: click took the next option for it (a markdown file named `--json`, no JSON)
    (["compare", "{tmp}/a", "{tmp}/b", "--markdown", "--json"], "'--markdown': '--json' is an option, not a path"),
    (["run", str(QUICKSTART), "--out", "--simulate"], "'--out': '--simulate' is an option, not a path"),
    # ... options whose value is a path or a name too (they had been plain strings: `--lm-eval --json` ate --json)
    (["run", str(QUICKSTART), "--out", "{tmp}/run", "--lm-eval", "--json"],
     "'--lm-eval': '--json' is an option, not a path"),
    (["run", str(QUICKSTART), "--out", "{tmp}/run", "--traces", "--json"],
     "'--traces': '--json' is an option, not a path"),
    (["predict", str(QUICKSTART), "--traces", "--json"], "'--traces': '--json' is an option, not a path"),
    (["bench", "fixed", "--tokenizer", "--json"], "'--tokenizer': '--json' is an option, not a path"),
    (["ci", "github", str(QUICKSTART), "--out", "{tmp}/.github/workflows/sweep.yml", "--ci-store", "--baseline"],
     "'--ci-store': '--baseline' is an option"),
]


@pytest.mark.parametrize(("argv", "said"), BAD_INPUT, ids=[" ".join(a[:3]) + f" [{s[:24]}]" for a, s in BAD_INPUT])
def test_bad_input_is_exit_2_naming_it_without_a_traceback(argv: list[str], said: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    (tmp_path / "dir").mkdir()
    (tmp_path / "empty.yaml").write_text("")
    args = [a.format(tmp=tmp_path, dir=tmp_path / "dir", empty=tmp_path / "empty.yaml") for a in argv]
    code, out, err = run_main(capsys, *args)  # an exception that is no llmsweep error fails the test here
    assert (code, said in err, out) == (2, True, ""), (code, err, out)
    assert "Traceback" not in err
    assert not (tmp_path / ".github").exists()  # `ci github` wrote no workflow that sweeps nothing


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "store.sqlite"
    shutil.copy(V3_STORE, path)  # opening a store migrates it in place: a copy
    monkeypatch.setenv("LLMSWEEP_STORE", str(path))
    return path


def test_slow_store_work_says_what_it_does_on_stderr_and_leaves_stdout_to_the_document(
        store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`results export` of a 6,000-result store ran 18 s, `import` of its export 14 s, `list --all` 22 s, each
    without a word; now each says what it is doing once its work runs past `notice.SLOW_S` (0 here: always)."""
    monkeypatch.setattr("llmsweep.cli.notice.SLOW_S", 0.0)
    code, out, err = run_main(capsys, "results", "export")
    assert code == 0 and json.loads(out)["format"] == "llmsweep-results", err
    n = len(json.loads(out)["results"])
    assert f"reading every result from {store}…" in err and f"exporting {count_of(n, 'result')} as json…" in err, err
    export = tmp_path / "export.json"
    export.write_text(out)
    code, out, err = run_main(capsys, "results", "import", export, "--store", tmp_path / "new.sqlite")
    assert code == 0 and f"imported {count_of(n, 'result')}" in out, err
    assert f"reading {export} (" in err and f"importing into {tmp_path / 'new.sqlite'}…" in err, err
    code, out, err = run_main(capsys, "results", "list", "--all", "--json")
    assert code == 0 and len(json.loads(out)) == n and f"reading every result from {store}…" in err, err


def test_quick_store_work_says_nothing_more(store: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("llmsweep.cli.notice.SLOW_S", 600.0)
    code, out, err = run_main(capsys, "results", "export")
    assert code == 0 and json.loads(out) and err == "", err


def test_a_failed_collection_says_why_its_requests_failed_and_its_json_is_whole(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`al collect` whose every request the server refused (the prompt plus the default --output-len 4096 past the
    model's 4,096-token context) said only "the server drafted nothing over the run (…, 0 requests answered)": the
    cause and its fix were in the cell's records. A failed run is exit 1, its --json document still whole on stdout."""
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    recipe = REPO / "tests" / "data" / "recipes" / "alcollect" / "llama-1b-ngram.yaml"
    code, out, err = run_main(capsys, "al", "collect", recipe, "--simulate", "--prompts", "builtin", "--num-prompts",
                              "1", "-k", "1", "--out", tmp_path / "al", "--json")
    assert code == 1, err
    (cell,) = json.loads(out)["cells"]
    assert cell["status"] == "failed" and "1 context_overflow" in cell["reason"], cell
    assert "lower --output-len" in cell["reason"] and "lower --output-len" in err, err


def test_frontier_json_carries_every_column_of_its_table(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`results frontier` showed each point's concurrency in its table and left it out of --json."""
    code, out, err = run_main(capsys, "results", "runs", "--json")
    runs = [r["run_id"] for r in json.loads(out)]
    drawn = 0
    for run in runs:
        code, table, err = run_main(capsys, "results", "frontier", run)
        assert code == 0, err
        code, out, err = run_main(capsys, "results", "frontier", run, "--json")
        points = [p for series in json.loads(out).values() for p in series]
        drawn += len(points)  # (a run of smoke points has no frontier: only valid points stand on one)
        for p in points:
            row = next(line for line in table.splitlines() if p["result_id"] in line)
            assert f" {p['conc']} " in row and p["job_id"] in row, (p, row)
    assert drawn, runs


def test_render_json_is_its_format_json(capsys: pytest.CaptureFixture[str]) -> None:
    """`render` alone spelt "print JSON" `--format json`; `--json` now says it as every command does."""
    code, ids, err = run_main(capsys, "matrix", "full-sweep", "--config-files", QUICKSTART, "--format", "ids")
    job = ids.split()[0]
    code, by_flag, err = run_main(capsys, "render", QUICKSTART, "--job", job, "--json")
    assert code == 0 and json.loads(by_flag)["job"] == job, err
    assert run_main(capsys, "render", QUICKSTART, "--job", job, "--format", "json")[:2] == (0, by_flag)


def test_every_path_option_refuses_a_value_spelled_like_an_option() -> None:
    """Each option that takes a path is `options.PathValue`, so an option given where its path was missing is said,
    not taken for a file name: a command added later is covered too."""
    plain = [f"{path} {p.opts[0]}" for path, command in COMMANDS.items() for p in command.params
             if isinstance(p, click.Option) and isinstance(p.type, click.Path) and not isinstance(p.type, PathValue)]
    assert plain == []


def test_no_option_help_shows_a_range_without_a_bound() -> None:
    """An option fed by a float field without bounds (`al collect --temperature`) showed `[x<=None]` in its help."""
    shown = {f"{path} {p.opts[0]}": p.get_help_extra(click.Context(COMMANDS[path])).get("range", "")
             for path, p in OPTIONS}
    assert [f"{opt} [{said}]" for opt, said in shown.items() if "None" in said] == []
    assert shown["al collect --temperature"] == ""  # a finite number, no bound to show
    assert shown["run --request-timeout"] == "x>0"


def test_every_group_whose_subcommands_take_json_takes_it_too() -> None:
    """`--json` given to a group holds for its subcommand (README): only `catalog` took it; `results --json runs`,
    `model --json presets` and the rest were a usage error."""
    def takes_json(command: click.Command) -> bool:
        return any(p.name == "as_json" or "--json" in getattr(p, "opts", ()) for p in command.params)

    lacking = [path for path, c in COMMANDS.items() if path and isinstance(c, click.Group) and not takes_json(c)
               and any(takes_json(COMMANDS[f"{path} {name}"]) for name in c.list_commands(click.Context(c)))]
    assert lacking == []


@pytest.mark.parametrize("argv", [
    ["model", "--json", "presets"],
    ["al", "--json", "lookup", "qwen3.5", "-m", "mtp", "-k", "3"],
    ["al", "--json", "qwen3.5", "-m", "mtp", "-k", "3"],  # the default subcommand after the group's flag
    ["catalog", "--json", "hardware"],
], ids=" ".join)
def test_json_given_to_a_group_holds_for_its_subcommand(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, *argv)
    assert code == 0, err[-2000:]
    json.loads(out)
    plain = run_main(capsys, *[a for a in argv if a != "--json"])
    assert plain[0] == 0 and plain[1] != out  # the same command without it prints its table


def test_json_given_to_the_results_group(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "results", "--json", "runs", "--store", store)
    assert code == 0 and isinstance(json.loads(out), list), err[-2000:]
