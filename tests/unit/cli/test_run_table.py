"""The end-of-run table on an ordinary terminal: every number whole (never wrapped, folded or cut), the job column
the one that gives (shortened ids, folded if it must), and the columns that do not fit beside the job in a
continuation table — none dropped."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from rich.console import Console

from llmsweep.cli import tables
from llmsweep.cli.run import _print_rows, run_title
from llmsweep.cli.tables import job_label, job_labels

JOB = ("qwen3.5_tp8_conc{c}_kvnone_spec-mtp_fp8_sglang_tp8-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-mtp_conc{c}_"
       "cluster-mi300x-amds_79501af65b18")
EXP = "qwen3.5_tp8_conc{c}_kvnone_spec-mtp"


def _row(conc: int, tput: float, **extra: Any) -> dict[str, Any]:
    row = {"job": JOB.format(c=conc), "conc": conc, "verdict": "valid", "resumed": False, "reused": False,
           "reason": None,
           "warnings": [], "source": "simulated", "clock": "virtual", "requests_ok": 764,
           "requests_failed": 0, "tput_per_gpu": tput, "output_tput_per_gpu": 98.1, "p50_ttft": 0.0361,
           "p50_tpot": 0.00255, "p50_intvty": 392.7, "tokens_per_joule": 6.006, "avg_power_w": 334.2,
           "eval_task": None, "eval_score": None, "eval_verdict": None, "seconds": 6.0, "summary_file": None}
    row.update(extra)
    return row


ROWS = [_row(1, 742.3), _row(4, 2006.9),
        _row(8, 13269.7, verdict="invalid", reason="failure ratio 0.2 > 0.05 [gate.failures]: the server answered "
             "500 to a fifth of the requests"),
        _row(16, 4820.4, eval_task="gsm8k", eval_score=0.8123, eval_verdict="valid")]
NUMBERS = [("742.3",), ("2,006.9", "764/0", "98.1", "36.1", "2.55", "392.7", "6.006", "334.2"),
           ("13,269.7",), ("4,820.4", "0.8123")]


def _render(width: int, monkeypatch: pytest.MonkeyPatch, rows: list[dict[str, Any]] = ROWS) -> str:
    """The table as a terminal `width` columns wide shows it (`table_console` is what `run` prints to)."""
    out = io.StringIO()
    monkeypatch.setattr(tables, "table_console",
                        lambda: Console(file=out, width=width, color_system=None, soft_wrap=False))
    _print_rows(rows, {r["job"]: EXP.format(c=r["conc"]) for r in rows})
    return out.getvalue()


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_every_number_is_whole_and_every_column_is_shown(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 120 columns `2,006.9` wrapped as `2,006.` / `9`, at 100 a cell read `2,00`, at 160–200 the efficiency, power
    and eval columns vanished."""
    text = _render(width, monkeypatch)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), max(len(line) for line in lines)
    cells = [c.strip() for line in lines for c in re.split(r"[│┃]", line)]
    for numbers in NUMBERS:
        for number in numbers:
            assert number in cells or any(number in c.split() for c in cells), (width, number, text)
    for header in ("Efficiency", "Power", "eval", "interactivity", "TTFT", "TPOT", "reason", "ok/failed"):
        assert header in text, (width, header, text)
    assert "gsm8k" in text and "[gate.failures]" in text  # free text as written, never read as markup
    # the shortened id keeps the experiment name and the hash (folded, at most, inside its column)
    joined = "".join(c for line in lines for c in re.split(r"[│┃]", line)[1:2]).replace(" ", "")
    assert "qwen3.5_tp8_conc4_kvnone_spec-mtp…79501af65b18" in joined, text


def test_a_log_gets_whole_ids_in_one_table(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _render(10_000, monkeypatch)
    assert "(continued)" not in text and JOB.format(c=4) in text and "shortened" not in text


def test_a_job_label_keeps_the_experiment_name_and_the_hash() -> None:
    assert job_label(JOB.format(c=4), EXP.format(c=4)) == "qwen3.5_tp8_conc4_kvnone_spec-mtp…79501af65b18"
    assert job_label(JOB.format(c=4) + "-repeat2", EXP.format(c=4)).endswith("…79501af65b18-repeat2")
    eval_id = JOB.format(c=4).replace("_79501af65b18", "_eval_79501af65b18")
    assert job_label(eval_id, EXP.format(c=4)).endswith("…eval_79501af65b18")
    assert job_label("short_id_79501af65b18") == "short_id_79501af65b18"


def test_rows_of_one_recipe_are_told_apart() -> None:
    """A recipe's jobs share its hash, and a fixed-length experiment name does not name the concurrency or the
    arm: the parts of the id that differ join the label, so the continuation tables' rows can be told apart."""
    fixed = ("qwen3.5_1024_1024_fp8_sglang_tp{tp}-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-none_conc{c}_"
             "cluster-mi300x-amds_b7e6f7ef7631")
    ids = [fixed.format(tp=8, c=4), fixed.format(tp=8, c=8), fixed.format(tp=4, c=8)]
    labels = job_labels(ids, dict.fromkeys(ids, "qwen3.5_1024_1024"))
    assert labels == ["qwen3.5_1024_1024…tp8-pp1-dcp1-pcp1-ep1-dpafalse_conc4_b7e6f7ef7631",
                      "qwen3.5_1024_1024…tp8-pp1-dcp1-pcp1-ep1-dpafalse_conc8_b7e6f7ef7631",
                      "qwen3.5_1024_1024…tp4-pp1-dcp1-pcp1-ep1-dpafalse_conc8_b7e6f7ef7631"]
    assert job_labels(ids[:2], dict.fromkeys(ids, "qwen3.5_1024_1024")) == [
        "qwen3.5_1024_1024…conc4_b7e6f7ef7631", "qwen3.5_1024_1024…conc8_b7e6f7ef7631"]
    assert job_labels([ids[0], ids[0] + "-repeat2"])[1].endswith("…b7e6f7ef7631-repeat2")


@pytest.mark.parametrize("width", [80, 100])
def test_a_folded_job_label_breaks_between_its_segments(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a narrow terminal the shortened id still needs several lines: they break after a `_`, `-` or `…`, never
    inside a segment (it read `qwen3.5_tp8_co` / `nc4_kvnone_spec-…`)."""
    text = _render(width, monkeypatch)
    segments = set(re.split(r"[_…\-]", "qwen3.5_tp8_conc4_kvnone_spec-mtp…79501af65b18"))
    key_lines = [re.split(r"[│┃]", line)[1].strip() for line in text.splitlines() if line.startswith(("│", "┃"))]
    conc4 = next(i for i, cell in enumerate(key_lines) if cell.startswith("qwen3.5_tp8_conc4"))
    lines = [key_lines[conc4]]
    for cell in key_lines[conc4 + 1:]:
        if not cell or cell.startswith("qwen3.5_"):
            break
        lines.append(cell)
    assert len(lines) > 1, text  # the label does not fit on one line at this width
    assert "".join(lines) == "qwen3.5_tp8_conc4_kvnone_spec-mtp…79501af65b18", lines
    for cell in lines:
        assert all(piece in segments for piece in re.split(r"[_…\-]", cell) if piece), (cell, text)


def test_the_caption_says_ids_were_shortened_only_when_one_was() -> None:
    """A table too wide for the terminal whose job ids are short enough to be kept whole said "job ids shortened to
    their experiment name and hash" of ids shown whole; and a shortened id holding `[` showed its markup escape."""
    from rich.console import Console

    columns = [tables.Column("job", kind="key", justify="left"), *(tables.Column(f"metric {i}") for i in range(12))]
    rows = [[tables.plain(job), *(f"{1000 + i:,}" for i in range(12))] for job in ("a[b]_conc1", "a[b]_conc4")]

    def render(short: list[str]) -> str:
        out = io.StringIO()
        for table in tables.fit_tables("t", columns, rows, width=80, short_keys=[tables.plain(s) for s in short]):
            Console(file=out, width=80, color_system=None).print(table)
        return out.getvalue()

    whole = render(["a[b]_conc1", "a[b]_conc4"])
    assert "shortened" not in whole and "a[b]_conc1" in whole, whole
    short = render(["a[b]…1", "a[b]…4"])
    assert "shortened" in short and "a[b]…1" in short and "\\" not in short, short


REFUSE = "a real engine would refuse them: [engine.known-incompatibility] HiCache with the direct I/O backend"


@pytest.mark.parametrize("width", [100, 10_000])
def test_a_warned_verdict_is_marked_and_its_warning_said_once_under_the_table(width: int,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A job a real engine would refuse showed a plain `valid`: its warning was only on stderr."""
    unmodelled = "the simulator does not model DP attention: it predicts the points without modelling it"
    rows = [_row(1, 742.3, warnings=[REFUSE]), _row(4, 2006.9, warnings=[REFUSE, unmodelled]), _row(8, 2500.0)]
    text = _render(width, monkeypatch, rows)
    verdicts = [re.split(r"[│┃]", line)[3].strip() for line in text.splitlines()
                if line.startswith("│") and re.split(r"[│┃]", line)[2].strip() in ("1", "4", "8")]
    assert verdicts == ["valid ⚠1", "valid ⚠1,2", "valid"], text
    flat = " ".join(text.split())
    assert flat.count("[engine.known-incompatibility]") == 1 and f"⚠1 {REFUSE}" in flat, text
    assert f"⚠2 {unmodelled}" in flat


def test_a_verdicts_warning_numbers_read_in_order_whichever_warning_came_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed recipe on the simulator: the resident arm's points carry one warning (the catalog estimates they were
    modelled with, numbered 1), the HiCache arm's that one after two others: its verdicts read `valid ⚠2,3,1`, out of
    the order of the notes under the table."""
    estimates = "modelled with catalog estimates: mi300x hbm_gb (`llmsweep catalog --json models|hardware` says how"
    unmodelled = "the simulator does not model `--page-size 1`: it predicts the points without modelling it"
    rows = [_row(1, 742.3, warnings=[estimates]), _row(4, 2006.9, warnings=[REFUSE, unmodelled, estimates])]
    text = _render(10_000, monkeypatch, rows)
    verdicts = [re.split(r"[│┃]", line)[3].strip() for line in text.splitlines()
                if line.startswith("│") and re.split(r"[│┃]", line)[2].strip() in ("1", "4")]
    assert verdicts == ["valid ⚠1", "valid ⚠1,2,3"], text
    flat = " ".join(text.split())
    assert f"⚠1 {estimates}" in flat and f"⚠2 {REFUSE}" in flat and f"⚠3 {unmodelled}" in flat, text


def test_a_resumed_job_shows_its_verdict_marked_resumed(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _render(10_000, monkeypatch, [_row(1, 742.3, verdict="smoke", resumed=True), _row(4, 2006.9)])
    assert "smoke (resumed)" in text and "skipped" not in text


def test_a_reused_job_shows_the_stored_results_verdict_marked_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    why = "reused: valid result of run r1 (job j)"
    text = _render(10_000, monkeypatch, [_row(1, 742.3, reused=True, reason=why), _row(4, 2006.9)])
    assert "valid (reused)" in text and why in text and "skipped" not in text


def test_the_title_says_what_the_figures_are_as_their_summaries_say() -> None:
    assert run_title([_row(1, 1.0), _row(4, 2.0)]) == "llmsweep run — simulated, virtual time"
    assert run_title([_row(1, 1.0, source="measured", clock="wall"), _row(4, 2.0, clock="wall")]) == (
        "llmsweep run — measured, wall-clock time; simulated, wall-clock time")
    # never assumed: no summary, no claim
    assert run_title([_row(1, 1.0, source=None, clock=None)]) == "llmsweep run"
    assert run_title([_row(1, 1.0, source="measured", clock=None)]) == "llmsweep run — measured"


def test_a_power_figure_the_simulator_modelled_is_marked_as_results_show_marks_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The end-of-run table showed the power model's tok/J and W/GPU as plain figures, where `results show` and the
    dashboard mark them modelled (`HotColumn.shown`, `MODELLED_MARK`); GPUs' own figures stay unmarked."""
    from llmsweep.metrics.registry import MODELLED_MARK

    rows = [_row(1, 742.3, power_source="simulated"), _row(4, 2006.9, power_source="nvml")]
    cells = [c.strip() for line in _render(200, monkeypatch, rows).splitlines() for c in re.split(r"[│┃]", line)]
    assert f"6.006 {MODELLED_MARK}" in cells and f"334.2 {MODELLED_MARK}" in cells, cells
    assert cells.count(f"6.006 {MODELLED_MARK}") == 1 and "6.006" in cells and "334.2" in cells
