"""`llmsweep report RUN`: a self-contained page, a Markdown summary and PNGs."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.report import write_report
from llmsweep.report.html import embed_json, render_html
from llmsweep.words import count_of


def _embedded(html: str) -> dict:
    m = re.search(r'<script id="llmsweep-data" type="application/json">(.*?)</script>', html, re.S)
    assert m
    return json.loads(m.group(1))


def test_cli_writes_a_self_contained_page(report_run, tmp_path: Path) -> None:
    out = tmp_path / "rep"
    res = CliRunner().invoke(cli, ["report", str(report_run.path), "--out", str(out), "--no-png"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "10 points, 1 invalid, 1 missing" in res.output
    html = (out / "index.html").read_text()
    # Offline: nothing is fetched — no external script, stylesheet, font or image.
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "@import" not in html and "fetch(" not in html
    payload = _embedded(html)
    assert len(payload["points"]) == 10 and set(payload["details"]) == {p["id"] for p in payload["points"]}
    slim = json.loads((out / "data.json").read_text())
    assert "details" not in slim and len(slim["points"]) == 10
    assert not list(out.glob("*.png"))


def test_payload_text_cannot_break_out_of_the_script_tag() -> None:
    evil = {"cmd": "</script><script>alert(1)</script>", "nan": float("nan")}
    text = embed_json(evil)
    assert "</script>" not in text and "<" not in text
    assert json.loads(text) == {"cmd": evil["cmd"], "nan": None}
    page = render_html({"x": "</script>"}, "t<b>")
    assert page.count("</script>") == 2 and "t&lt;b&gt;" in page


def test_markdown_summary_lists_frontier_invalid_and_missing(report_run, tmp_path: Path) -> None:
    files = write_report(report_run, tmp_path / "md", png=False)
    md = files.markdown.read_text()
    assert md.startswith("## llmsweep run `report-run`")
    assert "10 points in 3 series" in md and "1 invalid" in md
    assert md.count("mi355x") >= 1 and "realised TP 4 differs" in md and "`never-ran`" in md
    table_rows = [line for line in md.splitlines() if line.startswith("| Qwen")]
    assert 3 <= len(table_rows) <= 9
    # headed and printed as every table prints the metric (TTFT in ms with its decimals, not rounded to whole ms)
    from llmsweep.metrics.registry import HOT_BY_NAME
    from llmsweep.results.point import points_from_run

    assert "| P90 TTFT ms |" in md and "| Total tok/s/GPU |" in md
    ttft = {HOT_BY_NAME["p90_ttft"].cell(p.metric("p90_ttft")) for p in points_from_run(report_run)}
    assert any(f"| {cell} |" in row for row in table_rows for cell in ttft)


def test_png_plots_are_written(report_run, tmp_path: Path) -> None:
    """`llmsweep report RUN` draws them by default (`run` writes the page without them)."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "png"
    res = CliRunner().invoke(cli, ["report", str(report_run.path), "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    pngs = sorted(out.glob("*.png"))
    assert f"plots:     {count_of(len(pngs), 'PNG')} in {out}" in res.output
    assert {p.name for p in pngs} >= {"pareto_p90_e2e_norm_intvty.png", "pareto_conc.png"}
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


def test_report_overlays_imported_published_rows(report_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "s.sqlite"))
    rows = [{"hw": "mi300x", "conc": 4, "image": "published:image", "model": "Qwen/Qwen3.5-397B-A17B-FP8",
             "framework": "sglang", "precision": "fp8", "scenario_type": "agentic-coding", "tp": 8,
             "tput_per_gpu": 900.0, "p90_e2e_norm_intvty": 45.0, "p90_intvty": 50.0}]
    (tmp_path / "agg.json").write_text(json.dumps(rows))
    runner = CliRunner()
    imported = runner.invoke(cli, ["results", "import", str(tmp_path / "agg.json")], catch_exceptions=False)
    run_id = imported.output.strip().rsplit(" ", 1)[-1]
    out = tmp_path / "rep"
    res = runner.invoke(cli, ["report", str(report_run.path), "--out", str(out), "--no-png", "--with", run_id],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    payload = _embedded((out / "index.html").read_text())
    assert payload["overlays"] == [run_id]
    published = [p for p in payload["points"] if p["run_id"] == run_id]
    assert len(published) == 1 and published[0]["origin"] == "inferencex" and published[0]["source"] == "measured"
    assert published[0]["frontier"]["p90_e2e_norm_intvty"]  # alone in its series, so it is its own frontier
    assert "; 1 point of other runs drawn beside them" in res.output
    as_json = runner.invoke(cli, ["report", str(report_run.path), "--out", str(out), "--no-png", "--with", run_id,
                                  "--json"], catch_exceptions=False)
    counts = json.loads(as_json.output)
    assert counts["overlaid"] == 1 and counts["points"] == len(payload["points"]) - 1  # the run's own, apart
    # the header and summary.md count the run's own points and sources, the overlaid ones apart (they were counted
    # as the run's: 11 points in 4 series, source: measured, simulated)
    assert payload["headline"] == ("10 points in 3 series · source: simulated · +1 point of other runs overlaid "
                                   "in 1 series"), payload["headline"]
    assert payload["headline"] in (out / "summary.md").read_text()
    # the run drawn beside itself adds nothing: none counted (what is drawn, not what was asked)
    ingested = runner.invoke(cli, ["results", "ingest", str(report_run.path)], catch_exceptions=False)
    assert ingested.exit_code == 0, ingested.output
    itself = runner.invoke(cli, ["report", str(report_run.path), "--out", str(out), "--no-png", "--with",
                                 report_run.run_id, "--json"], catch_exceptions=False)
    assert json.loads(itself.stdout)["overlaid"] == 0
    assert "is the run itself: its points are drawn once" in itself.stderr  # said, not silent


def test_png_marks_smoke_points_and_labels_every_point(report_run, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from llmsweep.report.data import build_payload
    from llmsweep.report.plots import SMOKE_STYLE, pareto_figure
    from llmsweep.results.point import points_from_run

    payload = build_payload(report_run, points_from_run(report_run), details=False)
    smoke_ids = {p["id"] for p in payload["points"][:2]}
    for p in payload["points"]:
        if p["id"] in smoke_ids:
            p["verdict"] = "smoke"
    axis = next(a for a in payload["axes"] if a["key"] == "conc")
    fig = pareto_figure(payload, axis)
    ax = fig.axes[0]
    labels = sorted(t.get_text() for t in ax.texts)
    want = sorted(f"c{p['metrics']['conc']} · n{p['requests']['successful']}"
                  + (f"/{p['requests']['finished']}" if p["requests"]["finished"] != p["requests"]["successful"]
                     else "") for p in payload["points"])
    assert labels == want and "c16 · n" in " ".join(labels)
    faded = [c for c in ax.collections if c.get_alpha() == SMOKE_STYLE["alpha"]]
    assert sum(len(c.get_offsets()) for c in faded) == 2  # the two smoke points, and only they, are faded
    assert "smoke" in ax.get_title()
    plt.close(fig)

    # Two points on the same spot with different tags: their labels take different places around it (with the
    # same tag, one label stands for both: test_png_labels_a_point_two_series_share_once).
    twin = payload["points"][1]
    twin["metrics"] = dict(payload["points"][0]["metrics"])
    twin["requests"] = {"finished": 48, "successful": 47}
    fig = pareto_figure(payload, axis)
    by_xy: dict[tuple[float, float], list[tuple[float, float]]] = {}
    for t in fig.axes[0].texts:
        by_xy.setdefault(tuple(t.xy), []).append(tuple(t.xyann))
    assert any(len(v) == 2 for v in by_xy.values())
    assert all(len(set(v)) == len(v) for v in by_xy.values())
    plt.close(fig)

    # An empty run's plot says where its reasons are (nothing is listed below a PNG), with no made-up axis scale
    # (it read 'the reasons are listed below' over ticks from -0.04 to 0.04).
    empty = {**payload, "points": [], "series": [], "frontiers": {}, "evals": [],
             "empty": "No result in this run: 9 expected jobs, 9 without a result."}
    fig = pareto_figure(empty, axis)
    assert [t.get_text().replace("\n", " ") for t in fig.axes[0].texts] == [
        "No result in this run: 9 expected jobs, 9 without a result. The reasons are in summary.md and index.html "
        "beside this plot."]
    assert list(fig.axes[0].get_xticks()) == [] and list(fig.axes[0].get_yticks()) == []
    # inside the frame: the one long line ran over the y-axis title and past both edges of the plot
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame, said = fig.axes[0].get_window_extent(renderer), fig.axes[0].texts[0].get_window_extent(renderer)
    assert frame.x0 < said.x0 and said.x1 < frame.x1, (said, frame)
    assert not said.overlaps(fig.axes[0].yaxis.label.get_window_extent(renderer))
    plt.close(fig)
    evals = {**empty, "empty": None, "evals": [{"id": "e"}]}
    fig = pareto_figure(evals, axis)
    assert [t.get_text().replace("\n", " ") for t in fig.axes[0].texts] == [
        "No throughput point: the run's results are evals (1, in summary.md and index.html)."]
    plt.close(fig)


def test_cli_says_when_a_run_has_no_result(failed_run) -> None:
    run = failed_run
    res = CliRunner().invoke(cli, ["report", str(run.path), "--no-png"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "0 points, 0 invalid, 9 failed, 0 missing" in res.output  # they ran and failed: not missing
    assert ("No result in this run: 9 expected jobs, 9 without a result. The reasons are in the summary and the "
            "dashboard.") in res.output
    md = (run.path / "report" / "summary.md").read_text()
    assert "**No result in this run: 9 expected jobs, 9 without a result. The reasons are listed below.**" in md
    assert md.count("launch_failed: trace source") == 9


def test_report_draws_reused_points_from_the_store_in_page_summary_and_pngs(tmp_path: Path) -> None:
    """`llmsweep report` of a `run --reuse` run: the three jobs it stood on an earlier run's stored results are drawn
    beside the one it measured, each with the stored figures, marked as reused from that run (table column, banner,
    summary.md, diamonds with a legend entry in the PNGs); without the store that holds them they are listed, not
    drawn, with why."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.markers import MarkerStyle
    from support.synthetic import write_reusing_run

    from llmsweep.report.plots import pareto_figure
    from llmsweep.results.store import Store

    store = tmp_path / "store.sqlite"
    run = write_reusing_run(tmp_path, store)
    with Store(store, readonly=True) as opened:
        stored = {p.job_id: p for p in opened.results("earlier-run")}
    out = tmp_path / "report"
    res = CliRunner().invoke(cli, ["report", str(run.path), "--out", str(out), "--no-png", "--store", str(store)],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "1 point, 0 invalid, 0 missing, 3 reused from earlier runs (drawn)" in res.output
    data = json.loads((out / "data.json").read_text())
    reused = {p["job_id"]: p for p in data["points"] if p["reused"]}
    assert reused.keys() == stored.keys() and len(data["points"]) == 4 and data["missing"] == []
    for job, p in reused.items():
        s = stored[job]
        assert p["reused"] == {"run_id": "earlier-run", "job_id": job, "result_id": s.result_id, "verdict": s.verdict}
        assert (p["id"], p["run_id"], p["verdict"]) == (s.result_id, "earlier-run", s.verdict)
        assert p["metrics"]["tput_per_gpu"] == pytest.approx(s.metric("tput_per_gpu"), rel=1e-5)
    assert data["verdicts"]["reused"]["count"] == 3
    summary = (out / "summary.md").read_text()
    assert "3 reused (3 drawn)" in summary and "(reused from run `earlier-run`)" in summary

    payload = {**data, "details": {}}
    fig = pareto_figure(payload, next(a for a in payload["axes"] if a["key"] == "conc"))
    ax = fig.axes[0]
    marker = MarkerStyle("D")
    diamond = np.asarray(marker.get_path().transformed(marker.get_transform()).vertices).tolist()
    diamonds = [c for c in ax.collections
                if len(c.get_offsets()) and np.asarray(c.get_paths()[0].vertices).tolist() == diamond]
    assert sorted(x for c in diamonds for x, _ in c.get_offsets()) == sorted(float(p["metrics"]["conc"])
                                                                           for p in reused.values())
    assert "reused from run earlier-run" in [t.get_text() for t in fig.legends[0].get_texts()][-1]
    assert "reused" in ax.get_title()
    plt.close(fig)

    # The same run reported against a store that does not hold the earlier run: listed with why, not drawn.
    res = CliRunner().invoke(cli, ["report", str(run.path), "--out", str(tmp_path / "bare"), "--no-png", "--store",
                                   str(tmp_path / "empty.sqlite")], catch_exceptions=False)
    assert "3 reused from earlier runs (0 drawn)" in res.output
    bare = json.loads((tmp_path / "bare" / "data.json").read_text())
    assert len(bare["points"]) == 1 and [m["kind"] for m in bare["missing"]] == ["reused"] * 3
    assert all("does not hold it" in m["reason"] for m in bare["missing"])


def test_a_report_without_plots_removes_the_plots_an_earlier_report_drew(report_run, tmp_path: Path) -> None:
    """`run --force`/`--resume` into the same --out, or `report --no-png`, rewrote the page and left the earlier
    report's pareto_*.png, which drew the previous attempt's numbers under the same run id."""
    out = tmp_path / "rep"
    out.mkdir()
    old = [out / "pareto_conc.png", out / "pareto_p90_e2e_norm_intvty.png"]
    for path in old:
        path.write_bytes(b"\x89PNG\r\n\x1a\nan earlier attempt's numbers")
    (out / "mine.png").write_bytes(b"not the report's")
    res = CliRunner().invoke(cli, ["report", str(report_run.path), "--out", str(out), "--no-png"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert not any(path.exists() for path in old) and (out / "mine.png").exists()
    assert f"removed 2 outdated PNGs of an earlier report from {out}" in res.output
    again = write_report(report_run, out, png=False)
    assert again.stale_pngs == [] and (out / "index.html").is_file()


def test_the_runs_report_removes_an_earlier_reports_plots(failed_run, tmp_path: Path) -> None:
    """`run` writes the page without plots (`pipeline._report`) and says it removed the earlier ones."""
    from llmsweep.execute.pipeline import _report

    out = failed_run.path / "report"
    out.mkdir()
    (out / "pareto_conc.png").write_bytes(b"\x89PNG\r\n\x1a\nold")
    said: list[str] = []
    assert _report(failed_run.path, said.append, tmp_path / "none.sqlite") == out / "index.html"
    assert not (out / "pareto_conc.png").exists()
    assert any("removed 1 outdated PNG plot" in line for line in said), said


def test_summary_md_rounds_a_value_once_as_the_cli_does(report_run, tmp_path: Path) -> None:
    """The payload rounded to 6 significant figures and summary.md rounded again: 5804.9514 read 5,804.9 there and
    5,805.0 in the CLI. The payload keeps the stored value; each view rounds it once."""
    from llmsweep.metrics.registry import HOT_BY_NAME, HOT_COLUMNS
    from llmsweep.report.data import build_payload
    from llmsweep.report.markdown import run_summary_markdown
    from llmsweep.results.point import points_from_run

    points = points_from_run(report_run)
    payload = build_payload(report_run, points, details=False)
    stored = {p.result_id: p for p in points}
    for shown in payload["points"]:
        assert shown["metrics"] == {**{c.name: stored[shown["id"]].metric(c.name) for c in HOT_COLUMNS},
                                    "conc": shown["metrics"]["conc"]}
    shown = payload["points"][0]
    shown["metrics"]["tput_per_gpu"] = 5804.9514  # 5804.95 after the payload's rounding, then 5,804.9
    shown["frontier"] = dict.fromkeys(shown["frontier"], True)
    payload["frontiers"]["p90_e2e_norm_intvty"][shown["series"]] = [shown["id"]]
    md = run_summary_markdown(payload)
    assert HOT_BY_NAME["tput_per_gpu"].cell(5804.9514) == "5,805.0" and "| 5,805.0 |" in md


def test_an_out_that_cannot_be_written_is_bad_input_exit_2(report_run, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`report --out` under a file exited 1 (a failed result) where run and discover refuse it as bad input: exit 2,
    before the run is read; the library's own refusal (the default RUN/report unwritable) is bad input too."""
    from support.cli import run_main

    from llmsweep.errors import ConfigError
    from llmsweep.report import write_report

    (tmp_path / "file").write_text("")
    code, _, err = run_main(capsys, "report", report_run.path, "--out", tmp_path / "file" / "rep", "--no-png")
    assert code == 2 and "Traceback" not in err and "cannot be written" in err, err[-2000:]
    with pytest.raises(ConfigError, match="cannot create report folder"):
        write_report(report_run, tmp_path / "file" / "rep", png=False)


def test_png_legend_of_long_series_labels_stays_on_the_figure_beside_the_plot(report_run) -> None:
    """The seed recipe's HiCache arm was labelled with what the simulator does not model (a 170-character label): the
    PNG's legend, drawn inside the plot, ran off the figure's right edge, tight_layout squeezed the plot to half its
    width, the title lost its start (`...2644Z-d2d6a1 · ■ faded`), and over an overlay the legend covered points."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from llmsweep.report.data import build_payload
    from llmsweep.report.plots import pareto_figure
    from llmsweep.results.point import points_from_run

    payload = build_payload(report_run, points_from_run(report_run), details=False)
    long = ("Qwen3.5-397B-A17B-FP8 · mi300x · sglang · fp8 · agentic-coding · spec=mtp · offload=dram [simulated] · "
            "not modelled: `--page-size` `1` (its KV and prefix-hash blocks are 64 tokens)")
    payload["series"][0]["label"] = long
    for axis in payload["axes"]:
        fig = pareto_figure(payload, axis)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        page = fig.bbox
        legends = [lg for lg in (*fig.legends, ax.get_legend()) if lg is not None]
        assert len(legends) == 1
        box = legends[0].get_window_extent(renderer)
        assert page.x0 - 1 <= box.x0 and box.x1 <= page.x1 + 1 and page.y0 - 1 <= box.y0, (axis["key"], box, page)
        assert not box.overlaps(ax.get_window_extent(renderer)), "the legend covers the plot's points"
        title = ax.title.get_window_extent(renderer)
        assert page.x0 <= title.x0 and title.x1 <= page.x1, (axis["key"], title, page)
        assert ax.get_window_extent(renderer).width > 0.75 * page.width, "the plot was squeezed"
        shown = [t.get_text().replace("\n", " ") for t in legends[0].get_texts()]
        assert long in shown  # wrapped, never cut
        plt.close(fig)


def test_png_point_labels_stay_inside_the_plot_frame(report_run) -> None:
    """The label of the rightmost point (always put to its right) ran over the frame's right edge, and the top
    point's over the top, in nearly every plot of the quickstart and seed runs."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from llmsweep.report.data import build_payload
    from llmsweep.report.plots import pareto_figure
    from llmsweep.results.point import points_from_run

    payload = build_payload(report_run, points_from_run(report_run), details=False)
    for axis in payload["axes"]:
        fig = pareto_figure(payload, axis)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        frame = ax.get_window_extent(renderer)
        assert len(ax.texts) == len(payload["points"])
        for text in ax.texts:
            box = text.get_window_extent(renderer)
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1, (
                axis["key"], text.get_text(), box, frame)
        plt.close(fig)


def _agg_pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (the PNG tests draw no window); skips where matplotlib is missing."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _pareto_figures(run: Any) -> Iterator[tuple[dict[str, Any], Any]]:
    """(the run's dashboard payload, the PNG figure of one of its axes) for each axis, each figure closed after."""
    plt = _agg_pyplot()
    from llmsweep.report.data import build_payload
    from llmsweep.report.plots import pareto_figure
    from llmsweep.results.point import points_from_run

    payload = build_payload(run, points_from_run(run), details=False)
    for axis in payload["axes"]:
        fig = pareto_figure(payload, axis)
        yield payload, fig
        plt.close(fig)


def test_png_legend_says_which_series_coincide(tmp_path: Path) -> None:
    """Two series with identical points: in the PNG the one drawn second hid the other, and its legend entry was the
    only trace of it. Each entry says which series it coincides with and which is drawn under which, as the page's
    legend does."""
    from support.synthetic import write_coinciding_run

    for payload, fig in _pareto_figures(write_coinciding_run(tmp_path / "r")):
        none, dram = payload["series"]
        (legend,) = fig.legends
        shown = [t.get_text().replace("\n", " ") for t in legend.get_texts()]
        assert shown == [
            f"{none['label']} — coincides with {dram['label']} at 2 of its 3 points (identical values; drawn under it)",
            f"{dram['label']} — coincides with {none['label']} at all 2 of its points (identical values; drawn over "
            "it)"], shown


def test_png_labels_a_point_two_series_share_once(tmp_path: Path) -> None:
    """Two series with identical points (the quickstart's GPU-resident and HiCache arms at conc 4-16): each shared
    point's label (`c4 · n20`) was drawn twice, one just under the other, as if there were two points. A shared spot
    is labelled once (the legend says which series coincide); every point still has its label."""
    from support.synthetic import write_coinciding_run

    from llmsweep.report.plots import point_tag

    for payload, fig in _pareto_figures(write_coinciding_run(tmp_path / "r")):
        ax, y = fig.axes[0], payload["y"]["key"]
        key = next(a["key"] for a in payload["axes"] if a["label"] in ax.get_xlabel())
        spots = {(point_tag(p), p["metrics"][key], p["metrics"][y]) for p in payload["points"]}
        assert len(payload["points"]) == 5 and len(spots) == 3, spots  # conc 4 and 16 are shared
        labelled = [(t.get_text(), *t.xy) for t in ax.texts]
        assert len(labelled) == 3 and set(labelled) == spots, (key, labelled)


def test_png_draws_no_frontier_through_smoke_points_and_says_why(tmp_path: Path) -> None:
    """A series whose points were all smoke had a frontier line drawn through them in every PNG. It has none, and its
    legend entry says why; a series with valid points keeps its line, without its smoke point."""
    from support.synthetic import write_smoke_series_run

    for payload, fig in _pareto_figures(write_smoke_series_run(tmp_path / "r")):
        import matplotlib

        sglang, vllm = payload["series"]
        lines = fig.axes[0].get_lines()
        assert [matplotlib.colors.to_hex(line.get_color()) for line in lines] == [vllm["color"]]
        assert len(lines[0].get_xdata()) == 2  # vllm's conc 1 and 4: its smoke conc 16 is left off
        shown = [t.get_text().replace("\n", " ") for t in fig.legends[0].get_texts()]
        assert shown == [f"{sglang['label']} — no frontier: none of its 3 points is valid (3 smoke); a frontier is "
                         "drawn from valid points only", vllm["label"]], shown


def test_png_legend_swatch_is_the_series_colour_whatever_its_first_points_verdict(tmp_path: Path) -> None:
    """A series' legend entry took the style of its first drawn point: sglang's, all smoke, had a faded square (and
    one whose first point was invalid a hollow dashed circle), as if the series were smoke. Each entry is a filled
    circle in its series' colour, as the page's legend swatch is; the points keep their verdicts' marks."""
    from support.synthetic import write_smoke_series_run

    from llmsweep.report.plots import SMOKE_STYLE, pareto_figure

    plt = _agg_pyplot()
    import matplotlib

    from llmsweep.report.data import build_payload
    from llmsweep.results.point import points_from_run

    run = write_smoke_series_run(tmp_path / "r")
    payload = build_payload(run, points_from_run(run), details=False)
    invalid_first = {**payload, "points": [{**p, "valid": False} if p["series"] == payload["series"][0]["key"] else p
                                           for p in payload["points"]]}
    for shown in (payload, invalid_first):
        fig = pareto_figure(shown, next(a for a in shown["axes"] if a["key"] == "conc"))
        (legend,) = fig.legends
        handles = legend.legend_handles
        assert len(handles) == len(shown["series"]) == 2
        for handle, series in zip(handles, shown["series"], strict=True):
            face = handle.get_facecolor()[0]
            assert matplotlib.colors.to_hex(face) == series["color"] and face[3] == 1.0, (series["label"], face)
            assert handle.get_alpha() in (None, 1.0), series["label"]
            path = handle.get_paths()[0]
            assert len(path.vertices) > 4, series["label"]  # a circle's path, not a square's
        if shown is payload:  # its smoke points are still drawn faded
            faded = [c for c in fig.axes[0].collections if c.get_alpha() == SMOKE_STYLE["alpha"]]
            assert sum(len(c.get_offsets()) for c in faded) == 4  # sglang's 3 and vllm's conc 16
        plt.close(fig)


def test_png_rings_points_that_are_the_mean_of_their_repeats(report_run, tmp_path: Path) -> None:
    """The page says `mean of N repeats` of such a point (table, tooltip, drill-down); the PNGs drew it as any single
    result. It is ringed in its series' colour, whatever its verdict's marker, and the title's key says so, as it
    says what a faded square (smoke) is."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.collections import PathCollection
    from support.synthetic import SMOKE_WHY, set_verdict, write_repeated_run

    from llmsweep.report.data import build_payload
    from llmsweep.report.plots import REPEATS_STYLE, pareto_figure
    from llmsweep.results.point import points_from_run
    from llmsweep.results.rundir import load_run

    def rings(fig: matplotlib.figure.Figure) -> list[tuple[float, float]]:
        return [(float(x), float(y)) for c in fig.axes[0].collections
                if isinstance(c, PathCollection) and list(c.get_sizes()) == [REPEATS_STYLE["s"]]
                for x, y in np.asarray(c.get_offsets()).tolist()]

    run = write_repeated_run(tmp_path / "r", concs=(1, 4, 16), repeats=3)
    set_verdict(run, "J-conc4-repeat2", "smoke", [SMOKE_WHY])  # its mean is smoke: a faded square, ringed
    payload = build_payload(load_run(run.path), points_from_run(load_run(run.path)), details=False)
    assert [p["repeats"]["n"] for p in payload["points"]] == [3, 3, 3] and payload["points"][1]["verdict"] == "smoke"
    payload["points"][2]["repeats"] = None  # as a single result: not ringed
    axis = next(a for a in payload["axes"] if a["key"] == "p90_intvty")
    fig = pareto_figure(payload, axis)
    want = {(p["metrics"]["p90_intvty"], p["metrics"]["tput_per_gpu"]) for p in payload["points"][:2]}
    assert set(rings(fig)) == want and len(rings(fig)) == 2, rings(fig)
    assert "◎ ringed = mean of 3 repeats" in fig.axes[0].get_title() and "■ faded = smoke" in fig.axes[0].get_title()
    plt.close(fig)
    # a run without repeats: nothing ringed, nothing of repeats in its title
    plain = build_payload(report_run, points_from_run(report_run), details=False)
    fig = pareto_figure(plain, axis)
    assert rings(fig) == [] and fig.axes[0].get_title().replace("\n", " · ") == (
        "run report-run · ■ faded = smoke · ○ hollow = invalid · c = concurrency, n = successful requests measured "
        "(ok/finished if some failed)")
    plt.close(fig)


def test_png_draws_the_spread_of_a_mean_of_repeats_and_its_key_says_what_it_spans(tmp_path: Path) -> None:
    """A point that is the mean of its repeats was ringed, but drew nothing of how far its repeats lay apart: two
    series' means 300 tok/s/GPU apart read as different whether their repeats spread 5 or 500. Each such point has
    bars from mean - sd to mean + sd of its repeats (the sample SD the page's tooltip states) on x and y, the page
    draws the same span, and the title's key says what the bars are."""
    import statistics

    import numpy as np
    from matplotlib.collections import LineCollection
    from support.synthetic import write_repeated_run

    from llmsweep.report.data import REPEATS_SPREAD
    from llmsweep.results.point import points_from_run

    run = write_repeated_run(tmp_path / "r", concs=(1, 4, 16), repeats=3)
    by_point: dict[int, list[Any]] = {}
    for result in points_from_run(run):  # the repeats' own results, as measured
        by_point.setdefault(result.identity.conc, []).append(result)
    for payload, fig in _pareto_figures(run):
        ax, y = fig.axes[0], payload["y"]["key"]
        key = next(a["key"] for a in payload["axes"] if a["label"] in ax.get_xlabel())
        bars = [seg for c in ax.collections if isinstance(c, LineCollection) for seg in c.get_segments()]
        for p in payload["points"]:
            members = by_point[p["metrics"]["conc"]]
            assert len(members) == 3
            for metric, vertical in ((y, True), (key, False)):
                vals = [m.metric(metric) for m in members] if metric != "conc" else None
                if vals is None:  # concurrency is set, not measured: no spread
                    assert metric not in (p["spread"] or {})
                    continue
                mean, sd = statistics.fmean(vals), statistics.stdev(vals)
                assert sd > 0 and p["spread"][metric] == pytest.approx([mean - sd, mean + sd])
                xv, yv = p["metrics"][key], p["metrics"][y]
                want = [[xv, mean - sd], [xv, mean + sd]] if vertical else [[mean - sd, yv], [mean + sd, yv]]
                assert any(np.allclose(seg, want) for seg in bars), (key, metric, want)
        assert len(bars) == len(payload["points"]) * (1 if key == "conc" else 2), (key, len(bars))
        assert f"◎ ringed = mean of 3 repeats, bars {REPEATS_SPREAD}" in ax.get_title().replace("\n", " · ")
        assert REPEATS_SPREAD == "± 1 SD of the repeats" and payload["repeats_spread"] == REPEATS_SPREAD


def test_png_of_single_results_draws_no_spread(report_run) -> None:
    """A run without repeats: no point has a spread, and no bar is drawn."""
    from matplotlib.collections import LineCollection

    for payload, fig in _pareto_figures(report_run):
        assert all(p["spread"] is None for p in payload["points"])
        assert not [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
        assert "bars" not in fig.axes[0].get_title()


def test_png_labels_read_clear_of_rings_and_over_lines(tmp_path: Path) -> None:
    """In the PNGs of a run with repeats, the ring of a mean (wider than a single result's marker) ran under the first
    characters of its label, and frontier lines, bars and other rings crossed labels (`c8 · n2988` unreadable). A
    label keeps clear of its own ring and, as on the page, has a white outline and lies over markers and lines."""
    import math

    import numpy as np
    from matplotlib.collections import PathCollection
    from support.synthetic import write_repeated_run

    from llmsweep.report.plots import REPEATS_STYLE

    run = write_repeated_run(tmp_path / "r", concs=(1, 2, 4, 8, 16), repeats=2)
    for _payload, fig in _pareto_figures(run):
        ax = fig.axes[0]
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        to_px = fig.dpi / 72.0
        radius = (math.sqrt(REPEATS_STYLE["s"]) / 2 + REPEATS_STYLE["linewidths"] / 2) * to_px
        rings = [ax.transData.transform(xy) for c in ax.collections if isinstance(c, PathCollection)
                 and list(c.get_sizes()) == [REPEATS_STYLE["s"]] for xy in np.asarray(c.get_offsets())]
        assert len(rings) == 5 and len(ax.texts) == 5
        top = max(c.get_zorder() for c in [*ax.collections, *ax.get_lines()])
        for text, (cx, cy) in zip(ax.texts, rings, strict=True):
            assert tuple(ax.transData.transform(text.xy)) == pytest.approx((cx, cy))  # the label of this ring
            box = text.get_window_extent(renderer)
            nearest = math.hypot(max(box.x0 - cx, 0, cx - box.x1), max(box.y0 - cy, 0, cy - box.y1))
            assert nearest >= radius, (text.get_text(), nearest, radius)
            assert text.get_zorder() > top and text.get_path_effects(), text.get_text()


def test_png_title_says_what_a_labels_n_counts_a_means_n_its_repeats_together(tmp_path: Path) -> None:
    """The PNGs' key said `n = requests`: not that it counts the successful ones (`n45/48`: 45 of 48 finished), and
    beside a mean of repeats `c4 · n1358` read as one window's requests while it is every repeat's, the throughput
    beside it one window's mean. The title says it as the page's key does (`report.data.tag_key`)."""
    from support.synthetic import write_repeated_run

    from llmsweep.report.plots import point_tag
    from llmsweep.results.point import points_from_run

    run = write_repeated_run(tmp_path / "r", concs=(1, 4), repeats=3)
    measured: dict[int, int] = {}
    for result in points_from_run(run):
        assert result.num_successful is not None
        measured[result.identity.conc] = measured.get(result.identity.conc, 0) + result.num_successful
    for payload, fig in _pareto_figures(run):
        assert [point_tag(p) for p in payload["points"]] == [f"c{c} · n{measured[c]}" for c in (1, 4)]
        assert payload["tag_key"].endswith("; a mean's n sums its repeats"), payload["tag_key"]
        assert fig.axes[0].get_title().endswith(payload["tag_key"]), fig.axes[0].get_title()


def test_summary_md_gives_each_figure_of_a_mean_of_repeats_with_their_sd(report_run, tmp_path: Path) -> None:
    """summary.md gave a mean of repeats its means alone, where the page and the PNGs draw its repeats' spread as
    ± 1 SD bars: a reader of the pull-request comment could not tell a steady point from a noisy one. Each figure of
    such a point reads `mean ± sd` (the repeats' sample SD, in the column's unit), and a line under the table says
    what ± spans; a single result's figures stay bare."""
    from support.synthetic import write_repeated_run

    from llmsweep.metrics.registry import HOT_BY_NAME
    from llmsweep.report.data import REPEATS_SPREAD
    from llmsweep.report.markdown import SUMMARY_COLUMNS

    files = write_report(write_repeated_run(tmp_path / "run", concs=(1, 4), repeats=3), tmp_path / "report",
                         png=False)
    md = files.markdown.read_text(encoding="utf-8")
    points = json.loads(files.data.read_text(encoding="utf-8"))["points"]
    rows = [line for line in md.splitlines() if line.endswith("(mean of 3 repeats) |")]
    assert len(rows) == len(points) == 2
    for p in points:
        (row,) = [r for r in rows if r.split(" | ")[1] == str(p["metrics"]["conc"])]
        for name in SUMMARY_COLUMNS:
            col = HOT_BY_NAME[name]
            assert f" {col.cell(p['metrics'][name])} ± {col.cell(p['repeats']['sd'][name])} |" in row, (name, row)
    assert f"The figures of a mean of repeats read mean ± SD: {REPEATS_SPREAD}" in md
    single = write_report(report_run, tmp_path / "single", png=False).markdown.read_text(encoding="utf-8")
    assert "±" not in single


def test_refused_failed_and_missing_jobs_are_counted_apart(tmp_path: Path) -> None:
    """A run whose jobs were refused said `· 9 missing` in summary.md where the dashboard said `9 refused`, and
    `report` printed `2 points, 0 invalid, 7 missing` where one of the 7 had failed (interrupted). The page's counts
    (`report.data.run_counts`) say refused, failed and missing (planned, never run) apart, and so do both."""
    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    run = write_synthetic_run(tmp_path / "run", [SyntheticPoint(synthetic_job(conc=1))], run_id="mixed",
                              expected_extra=("never-ran", "refused-1", "refused-2", "stopped"))
    stopped = run.path / "jobs" / "stopped"
    stopped.mkdir()
    (stopped / "job.json").write_text(json.dumps(synthetic_job(conc=2, job_id="stopped")))
    (stopped / "outcome.json").write_text(json.dumps({"job_id": "stopped", "exp_name": "x", "status": "failed",
                                                      "reasons": ["interrupted by SIGINT"]}))
    meta = json.loads((run.path / "run.json").read_text())
    meta["outcomes"] = [{"job_id": j, "exp_name": "x", "status": "refused", "reasons": ["policy error [x]: why"]}
                        for j in ("refused-1", "refused-2")]
    (run.path / "run.json").write_text(json.dumps(meta))
    res = CliRunner().invoke(cli, ["report", str(run.path), "--no-png"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "1 point, 0 invalid, 2 refused, 1 failed, 1 missing" in res.output, res.output
    md = (run.path / "report" / "summary.md").read_text()
    assert " · 2 refused · 1 failed · 1 missing" in md.splitlines()[2], md
    as_json = json.loads(CliRunner().invoke(cli, ["report", str(run.path), "--no-png", "--json"],
                                            catch_exceptions=False).output)
    assert (as_json["refused"], as_json["failed"], as_json["missing"]) == (2, 1, 1)
