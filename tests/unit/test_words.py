"""`llmsweep.words`: the one wording of a count — `1 GPU`, `8 GPUs` — that messages and the dashboard share."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from llmsweep.words import count_of, noun

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "llmsweep"
TOOLS = (REPO / "bench", REPO / "scripts")
"""The repository's own tools beside the package: benches and the CI and GPU scripts, whose lines a user reads too."""


def test_a_count_takes_the_singular_for_one_and_the_plural_otherwise() -> None:
    assert [count_of(n, "GPU") for n in (0, 1, 2, 8)] == ["0 GPUs", "1 GPU", "2 GPUs", "8 GPUs"]
    assert count_of(1, "process", "processes") == "1 process"
    assert count_of(3, "process", "processes") == "3 processes"
    assert (noun(1, "node"), noun(2, "node")) == ("node", "nodes")


MAYBE_PLURAL = re.compile(r"[A-Za-z][\w-]*\((?:s|es|ies)\)")
"""A noun written as maybe plural: `job(s)`, `launch(es)`, `summary(ies)` (a unit such as `time (s)` is no plural)."""
ALLOWED = {
    ("metrics/gates.py", "worker(s)"): "the opening that runs recorded before 2026-12-07 wrote for a client worker "
                                       "that died: read back from their summaries, so it stays as they wrote it",
    ("sim_warnings.py", "request(s)"): "names the opening that runs recorded before 2026-12-07 wrote, which "
                                       "`warning_kind` still reads",
    ("words.py", "GPU(s)"): "the wording this module replaces, named in its docstring",
    ("execute/pipeline.py", "job(s)"): "quotes the line a run printed before 2026-12-05 (`expected 1 job(s)`) in "
                                       "the history of `_supersede_renamed`'s docstring",
}
"""Where a maybe-plural may stay in `src`, each with why; no message a user reads is among them."""


def _strings(path: Path) -> list[tuple[int, str]]:
    """Every string a Python module holds (messages, f-string parts, help, docstrings), by line; comments are not
    strings, and say what they like."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def _js_strings(path: Path) -> list[tuple[int, str]]:
    """The string literals of the dashboard's script, by line, its `//` and `/* */` comments left out."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in re.finditer(r'/\*.*?\*/|//[^\n]*|"(?:[^"\\\n]|\\.)*"', text, re.S):
        if match.group().startswith('"'):
            found.append((text.count("\n", 0, match.start()) + 1, match.group()))
    return found


def maybe_plurals(path: Path, root: Path = SRC) -> list[str]:
    """`FILE:LINE: word(s)` for each maybe-plural a source file under `root` writes that `ALLOWED` does not list."""
    strings = _js_strings(path) if path.suffix == ".js" else _strings(path)
    rel = path.relative_to(root).as_posix()
    return [f"{rel}:{line}: {word}" for line, value in strings for word in MAYBE_PLURAL.findall(value)
            if (rel, word) not in ALLOWED]


def test_no_message_writes_a_maybe_plural() -> None:
    """`3 job(s) refused`, `1 point(s)`, `GPU(s)`, `node(s)`: a count is said through `count_of` / `noun` in every
    room — Python messages, errors, log lines and help, and the dashboard's script (its `countOf` / `noun`) — and a
    string with no count says its plural (`the jobs to run`). A new one written by hand fails here, naming it."""
    files = [*sorted(SRC.rglob("*.py")), *sorted(SRC.rglob("*.js"))]
    assert any(f.name == "dashboard.js" for f in files)
    assert [hit for path in files for hit in maybe_plurals(path)] == []


def _shell_lines(path: Path) -> list[tuple[int, str]]:
    """A shell script's lines that are not comments (what it echoes, and the code around it), by line."""
    return [(i, line) for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if not line.lstrip().startswith("#")]


def test_no_tool_beside_the_package_writes_a_maybe_plural() -> None:
    """`start_slurm_multinode: 3 node(s) up`, `2 job(s) compared`: the benches and the CI and GPU scripts count in
    words as the package does (a Python tool with `count_of`, a shell script with its own singular for one)."""
    found = [hit for root in TOOLS for path in sorted(root.rglob("*.py")) for hit in maybe_plurals(path, root)]
    found += [f"{path.relative_to(REPO).as_posix()}:{line}: {word}" for root in (*TOOLS, REPO / ".ci")
              for path in sorted(root.rglob("*")) if path.suffix == ".sh" or path.name == "run"
              for line, text in _shell_lines(path) for word in MAYBE_PLURAL.findall(text)]
    assert any(root.is_dir() for root in TOOLS)
    assert found == []


def test_the_maybe_plural_scan_finds_what_it_names(tmp_path: Path) -> None:
    """The scan above fails on a maybe-plural in a message, a docstring or the dashboard's script, and passes a
    comment, a unit, and the listed exceptions."""
    py, js = tmp_path / "m.py", tmp_path / "m.js"
    py.write_text('"""Counts job(s)."""\n# a comment may say job(s)\nx = f"{n} point(s) of {m} launch(es)"\n'
                  'y = "think time (s)"\n', encoding="utf-8")
    js.write_text('// job(s)\n/* point(s) */ var a = n + " summary(ies)";\nvar b = "time (s)";\n', encoding="utf-8")
    assert maybe_plurals(py, tmp_path) == ["m.py:1: job(s)", "m.py:3: point(s)", "m.py:3: launch(es)"]
    assert maybe_plurals(js, tmp_path) == ["m.js:2: summary(ies)"]
    assert maybe_plurals(SRC / "metrics" / "gates.py") == []  # its legacy opening is listed, with why


HAND_COUNT = re.compile(r"\{([^{}]+)\} (GPUs|nodes|workers)\b")
"""An f-string's count written before a hand-made plural (`over the {tp} GPUs`, `{n} nodes`): `1 GPUs` at a count of
one."""
NOT_COUNTS = {"kind", "where[0]"}
"""Expressions before such a word that name a kind of worker, not a count of them (`the {kind} workers`)."""


def test_no_message_writes_a_counts_plural_by_hand() -> None:
    """`over the {config.tp} GPUs` said `over the 1 GPUs` at TP 1: a count before `GPUs`, `nodes` or `workers` in an
    f-string is said through `count_of` (`over {count_of(tp, 'GPU')}`), even where the count cannot be one today. A
    constant (`{MAX_NODES} nodes`) and a worker's kind are no count to say."""
    found = [f"{path.relative_to(SRC)}:{i}: {{{match.group(1)}}} {match.group(2)}"
             for path in sorted(SRC.rglob("*.py")) if path.name != "words.py"
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if not line.lstrip().startswith("#")
             for match in HAND_COUNT.finditer(line)
             if match.group(1) not in NOT_COUNTS and not re.fullmatch(r"[A-Z_]+", match.group(1))]
    assert found == []


def test_the_hand_count_scan_finds_what_it_names() -> None:
    """The scan above fails on the line the review found, and passes what it exempts."""
    hits = [m.group(1) for m in HAND_COUNT.finditer('f"{gb:.4g} GB of DRAM over the {config.tp} GPUs (SGLang\'s "')]
    assert hits == ["config.tp"]
    assert [m.group(1) for m in HAND_COUNT.finditer('f"{count_of(tp, \'GPU\')} over {count_of(n, \'node\')}"')] == []


def test_recorded_counts_are_said_in_words_and_old_records_still_read() -> None:
    """A virtual-time point's late requests and a run's dead client workers are counted in words, and the openings
    that runs recorded before (`request(s)`, `client worker(s) died`) keep their meaning: a timeout warning of its own
    kind, a stop that invalidates the run."""
    from llmsweep.metrics.gates import EARLY_STOPS, client_workers_died
    from llmsweep.sim_warnings import WarningKind, timeout_not_applied, warning_kind

    assert timeout_not_applied(1, 5).startswith("1 request ran longer than --request-timeout 5 s")
    assert timeout_not_applied(2, 5).startswith("2 requests ran longer")
    one, two = client_workers_died(["w0 exited with 1"]), client_workers_died(["w0 exited with 1", "w1 exited with -9"])
    assert (one, two) == ("the client lost 1 worker: w0 exited with 1",
                          "the client lost 2 workers: w0 exited with 1, w1 exited with -9")
    assert all(reason.startswith(EARLY_STOPS) for reason in (one, two, "client worker(s) died: w0 exited with 1"))
    assert warning_kind("3 request(s) ran longer than --request-timeout 5 s, …") is WarningKind.TIMEOUT_NOT_APPLIED
