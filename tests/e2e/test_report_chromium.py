"""The dashboard in a real browser: headless Chromium via Selenium, offline, from file://.

Checks what a reader relies on: the page loads without console errors, every series and point is drawn, the x-axis
selector really changes the x values, a point opens its drill-down, and a screenshot can be taken; the page explains
its verdicts (a reason column, one banner per verdict kind with identical reasons grouped, labelled points, the table
in series-then-concurrency order, refused jobs with their reasons) and says so when a run has no result at all.
Set LLMSWEEP_SCREENSHOT_DIR to keep the screenshots.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.synthetic import (
    POOL_TOKENS,
    SyntheticPoint,
    synthetic_job,
    write_coinciding_run,
    write_repeated_run,
    write_smoke_series_run,
    write_synthetic_run,
)

from llmsweep.metrics.model import PowerBlock, Summary
from llmsweep.report import write_report
from llmsweep.words import count_of

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                       reason="needs /usr/bin/chromium and /usr/bin/chromedriver "
                              "(apt-get install chromium chromium-driver)"),
]


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    points = []
    for fw, hw, speed in (("sglang", "mi300x", 1.0), ("vllm", "mi300x", 0.8), ("sglang", "mi355x", 1.6)):
        for conc in (1, 4, 16):
            points.append(SyntheticPoint(synthetic_job(conc=conc, framework=fw, hardware=hw), speed=speed, requests=40))
    points.append(SyntheticPoint(synthetic_job(conc=8, framework="vllm", hardware="mi300x"), speed=0.8, requests=40,
                                 invalid_reason="realised TP 4 differs from the job's tp 8"))
    root = tmp_path_factory.mktemp("chromium")
    run = write_synthetic_run(root / "run", points, run_id="browser-run", expected_extra=("never-ran", REFUSED))
    for job, window in ((points[0].job, 1), (points[1].job, 2)):  # sglang on mi300x at conc 1 and 4: too short
        path = run.path / "jobs" / job["id"] / "summary.json"
        summary = Summary.load(path)
        summary.validity.verdict = "smoke"
        summary.validity.reasons = [f"smoke run: profile window {window} s is shorter than 900 s"]
        path.write_text(json.dumps(summary.dump()), encoding="utf-8")
    for job in (points[2].job, points[3].job):  # sglang on mi300x at conc 16, vllm on mi300x at conc 1: no power
        path = run.path / "jobs" / job["id"] / "summary.json"
        summary = Summary.load(path)
        summary.power = PowerBlock(backend=None, error=NO_POWER_WHY)
        path.write_text(json.dumps(summary.dump()), encoding="utf-8")
    meta = json.loads((run.path / "run.json").read_text())
    meta["outcomes"] = [{"job_id": REFUSED, "exp_name": "x", "status": "refused", "reasons": [REFUSED_WHY]}]
    (run.path / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    return write_report(run.path, root / "report", png=False).html


NO_POWER_WHY = ("nvml: nvidia-ml-py is not installed (pip install 'llmsweep[power]'); to record power: install it, or "
                "--power-backend amd-smi|nvidia-smi|dcgm")
REFUSED = "qwen3.5_tp8_conc32_kvnone_spec-none_sglang_mi300x"
REFUSED_WHY = "policy error [grid.max-conc] conc [32] above policy.max-conc 16 (fix: drop the points above it)"


@pytest.fixture(scope="module")
def empty_report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Nine jobs that all failed the same way: no point at all."""
    root = tmp_path_factory.mktemp("chromium-empty") / "run"
    ids = [f"job-conc{c}" for c in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    for jid in ids:
        (root / "jobs" / jid).mkdir(parents=True)
        (root / "jobs" / jid / "job.json").write_text(json.dumps(synthetic_job(job_id=jid)))
        (root / "jobs" / jid / "outcome.json").write_text(json.dumps(
            {"job_id": jid, "exp_name": "x", "status": "launch_failed", "reasons": [EMPTY_WHY]}))
    (root / "run.json").write_text(json.dumps({"run_id": "all-failed", "expected_job_ids": ids}))
    return write_report(root, root.parent / "report", png=False).html


EMPTY_WHY = "trace source hf:agentx/traces is not available offline (fix: pass --traces synthetic)"


@pytest.fixture(scope="module")
def driver() -> Iterator[object]:
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="llmsweep-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,1700"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)  # explicit driver: no download
    drv.set_page_load_timeout(60)
    try:
        yield drv
    finally:
        drv.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _errors(drv) -> list[dict]:
    return [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]


def test_dashboard_in_headless_chromium(driver, report_html: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    drv = driver
    drv.get(report_html.resolve().as_uri())
    WebDriverWait(drv, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    assert _errors(drv) == []

    payload = drv.execute_script("return JSON.parse(document.getElementById('llmsweep-data').textContent)")
    assert len(payload["points"]) == 10 and len(payload["series"]) == 3

    # Every series in the legend, every point drawn as a marker, the invalid one distinct.
    assert len(drv.find_elements(By.CSS_SELECTOR, "#legend .item")) == 3
    markers = drv.find_elements(By.CSS_SELECTOR, "#chart .marker")
    assert len(markers) == 10
    for s in payload["series"]:
        want = sum(1 for p in payload["points"] if p["series"] == s["key"])
        assert len(drv.find_elements(By.CSS_SELECTOR, f'#chart .marker[data-series="{s["key"]}"]')) == want
    invalid = drv.find_elements(By.CSS_SELECTOR, "#chart .marker.invalid")
    assert len(invalid) == 1 and invalid[0].get_attribute("data-valid") == "0"
    assert len(drv.find_elements(By.CSS_SELECTOR, "#chart polyline.frontier")) == 3
    assert "1 job without a result" in drv.find_element(By.ID, "banner-failed").text
    assert len(drv.find_elements(By.CSS_SELECTOR, "#points-table tbody tr[data-id]")) == 10

    # The default x axis is P90 E2E-normalised interactivity; switching to concurrency moves every point.
    def xs() -> list[float]:
        return sorted(float(m.get_attribute("data-x")) for m in drv.find_elements(By.CSS_SELECTOR, "#chart .marker"))

    before = xs()
    expected = sorted(p["metrics"]["p90_e2e_norm_intvty"] for p in payload["points"])
    assert before == pytest.approx(expected)
    Select(drv.find_element(By.ID, "x-axis")).select_by_value("conc")
    after = xs()
    assert after == sorted(p["metrics"]["conc"] for p in payload["points"]) and after != before
    assert "Concurrency" in drv.find_element(By.ID, "x-title").text
    Select(drv.find_element(By.ID, "x-axis")).select_by_value("p90_ttft")
    assert xs() == pytest.approx(sorted(p["metrics"]["p90_ttft"] for p in payload["points"]))
    Select(drv.find_element(By.ID, "x-axis")).select_by_value("p90_e2e_norm_intvty")

    # The y selector switches to output throughput per GPU, with that metric's own frontiers.
    Select(drv.find_element(By.ID, "y-axis")).select_by_value("output_tput_per_gpu")
    ys = sorted(float(m.get_attribute("data-y")) for m in drv.find_elements(By.CSS_SELECTOR, "#chart .marker"))
    assert ys == pytest.approx(sorted(p["metrics"]["output_tput_per_gpu"] for p in payload["points"]))
    assert "Output throughput" in drv.find_element(By.ID, "y-title").text
    assert len(drv.find_elements(By.CSS_SELECTOR, "#chart polyline.frontier")) == 3
    Select(drv.find_element(By.ID, "y-axis")).select_by_value("tput_per_gpu")

    overview = tmp_path / "dashboard_overview.png"
    assert drv.save_screenshot(str(overview))

    # Hover shows details; click opens the drill-down with charts, the server command and the verdict.
    from selenium.webdriver.common.action_chains import ActionChains

    target = drv.find_element(By.CSS_SELECTOR, "#chart .marker.invalid")
    ActionChains(drv).move_to_element(target).perform()
    tip = drv.find_element(By.ID, "tooltip")
    assert tip.is_displayed() and "invalid" in tip.text
    target_id = target.get_attribute("data-id")
    drv.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", target)
    drill = drv.find_element(By.ID, "drilldown")
    WebDriverWait(drv, 10).until(lambda d: drill.is_displayed())
    assert drill.get_attribute("data-id") == target_id
    selected = drv.find_elements(By.CSS_SELECTOR, "#chart .marker.selected")
    assert [m.get_attribute("data-id") for m in selected] == [target_id]
    assert "realised TP 4 differs" in drv.find_element(By.ID, "validity-reasons").text
    assert "launch_server" in drv.find_element(By.ID, "server-command").text
    assert len(drill.find_elements(By.CSS_SELECTOR, ".mini svg")) == 6
    assert "source: simulated" in drill.text
    # the KV chart names the pool the engine reported (the fabricated engine's, `support.synthetic.POOL_TOKENS`)
    assert f"GPU KV-cache usage (server; pool of {POOL_TOKENS:,} tokens)" in drill.text

    shot = tmp_path / "dashboard_drilldown.png"
    assert drv.save_screenshot(str(shot))
    for png in (overview, shot):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    keep = os.environ.get("LLMSWEEP_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for png in (overview, shot):
            shutil.copy(png, Path(keep) / png.name)
    assert _errors(drv) == []


def _open(drv, html: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    drv.get(html.resolve().as_uri())
    WebDriverWait(drv, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    assert _errors(drv) == []


def test_dashboard_explains_its_verdicts(driver, report_html: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    drv = driver
    _open(drv, report_html)
    payload = drv.execute_script("return JSON.parse(document.getElementById('llmsweep-data').textContent)")
    labels = {s["key"]: s["label"] for s in payload["series"]}
    by_id = {p["id"]: p for p in payload["points"]}

    # One banner per verdict kind; the two smoke reasons differ only in a number, so they are one line with ×2.
    smoke = drv.find_element(By.ID, "banner-smoke")
    (line,) = smoke.find_elements(By.CSS_SELECTOR, "li")
    assert line.get_attribute("data-count") == "2" and "×2" in line.text
    assert "profile window 1–2 s is shorter than 900 s" in line.text and "conc 1, 4" in line.text
    assert "realised TP 4 differs" in drv.find_element(By.ID, "banner-invalid").text
    refused = drv.find_element(By.ID, "banner-refused")
    assert "1 job refused" in refused.text and REFUSED_WHY in refused.text

    # Every plotted point is labelled with its concurrency and its request count.
    markers = drv.find_elements(By.CSS_SELECTOR, "#chart .marker")
    tags = {t.get_attribute("data-id"): t.text for t in drv.find_elements(By.CSS_SELECTOR, "#chart .pt-label")}
    assert set(tags) == {m.get_attribute("data-id") for m in markers} and len(tags) == 10
    for pid, text in tags.items():
        p = by_id[pid]
        assert text.startswith(f"c{p['metrics']['conc']} · n{p['requests']['successful']}"), text
    assert len(drv.find_elements(By.CSS_SELECTOR, "#chart .marker.smoke")) == 2
    assert _label_overlaps(drv) == []

    # The table: a reason column, no column twice, rows by series then concurrency as a number.
    def headers() -> list[str]:
        return [th.text.rstrip(" ▲▼") for th in drv.find_elements(By.CSS_SELECTOR, "#points-table th")]

    def row_order() -> list[tuple[str, int]]:
        rows = drv.find_elements(By.CSS_SELECTOR, "#points-table tbody tr[data-id]")
        return [(labels[by_id[r.get_attribute("data-id")]["series"]], by_id[r.get_attribute("data-id")]["metrics"]
                 ["conc"]) for r in rows]

    assert "Reason" in headers() and len(headers()) == len(set(headers()))
    order = row_order()
    assert order == sorted(order) and [c for s, c in order if "vllm" in s] == [1, 4, 8, 16]
    reasons = {r.get_attribute("data-id"): r.find_element(By.CSS_SELECTOR, "td.reason").text
               for r in drv.find_elements(By.CSS_SELECTOR, "#points-table tbody tr[data-id]")}
    for pid, text in reasons.items():
        assert text == by_id[pid]["reason"]
    assert sum(1 for t in reasons.values() if "shorter than 900 s" in t) == 2
    for axis in ("conc", "p90_ttft", "p90_intvty"):
        Select(drv.find_element(By.ID, "x-axis")).select_by_value(axis)
        assert len(headers()) == len(set(headers())), (axis, headers())
    Select(drv.find_element(By.ID, "x-axis")).select_by_value("p90_e2e_norm_intvty")
    conc_header = drv.find_element(By.CSS_SELECTOR, '#points-table th[data-col="conc"]')
    conc_header.click()  # sorts on concurrency alone, as numbers (1, 4, 8, 16, not 1, 16, 4, 8)
    concs = [c for _, c in row_order()]
    assert concs == sorted(concs) and concs[-3:] == [16, 16, 16]

    # A refused job is a row with its status and reason, and so is the one that never ran.
    row = drv.find_element(By.CSS_SELECTOR, f'#points-table tr.missing.refused[data-job="{REFUSED}"]')
    assert "refused" in row.text and REFUSED_WHY in row.find_element(By.CSS_SELECTOR, "td.reason").text
    assert drv.find_elements(By.CSS_SELECTOR, '#points-table tr.missing.failed[data-job="never-ran"]')

    shot = tmp_path / "dashboard_verdicts.png"
    assert drv.save_screenshot(str(shot))
    _keep(shot)
    assert _errors(drv) == []


def test_points_without_gpu_power_have_a_banner_that_says_why(driver, report_html: Path) -> None:
    """Two points ran where no power backend could sample: the page says so in one banner line with the reason, how
    to record power and which concurrencies (it was said only in summary.md and on the run's end lines)."""
    from selenium.webdriver.common.by import By

    _open(driver, report_html)
    banner = driver.find_element(By.ID, "banner-power")
    assert banner.get_attribute("data-count") == "2"
    assert "2 points have no GPU power" in banner.text
    (line,) = banner.find_elements(By.CSS_SELECTOR, "ul.reasons li")
    assert line.get_attribute("data-count") == "2" and NO_POWER_WHY in line.text
    # two series: each named with its concurrency (a bare `conc 1, 16` could be any of the three series')
    which = ("mi300x · sglang · fp8 · agentic-coding [simulated] · conc 16; "
             "Qwen3.5-397B-A17B-FP8 · mi300x · vllm · fp8 · agentic-coding [simulated] · conc 1")
    assert line.text.endswith(which), line.text
    assert _errors(driver) == []


def test_an_empty_run_says_so_once(driver, empty_report_html: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    drv = driver
    _open(drv, empty_report_html)
    banner = drv.find_element(By.ID, "empty-banner").text
    assert "No result in this run: 9 expected jobs, 9 without a result" in banner
    failed = drv.find_element(By.ID, "banner-failed")
    (line,) = failed.find_elements(By.CSS_SELECTOR, "li")  # nine identical errors, one line
    assert line.get_attribute("data-count") == "9" and "×9" in line.text and EMPTY_WHY in line.text
    chart = drv.find_element(By.ID, "chart-empty").text
    assert "no result to plot" in chart and "no point has values" not in chart
    assert len(drv.find_elements(By.CSS_SELECTOR, "#points-table tr.missing.failed")) == 9
    shot = tmp_path / "dashboard_empty.png"
    assert drv.save_screenshot(str(shot))
    _keep(shot)
    assert _errors(drv) == []


def _label_overlaps(drv) -> list[tuple[list[float], list[float]]]:
    boxes = drv.execute_script("return Array.from(document.querySelectorAll('#chart .pt-label')).map(function (t) {"
                               " var b = t.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; })")
    return [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]


def test_labels_of_points_that_nearly_coincide_stay_apart(driver, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    # Two engines with nearly the same results: their points at each concurrency land all but on top of each other.
    points = [SyntheticPoint(synthetic_job(conc=c, framework=fw), requests=40, speed=speed)
              for fw, speed in (("sglang", 1.0), ("vllm", 1.002)) for c in (1, 4, 16)]
    run = write_synthetic_run(tmp_path / "run", points, run_id="close-run")
    _open(driver, write_report(run.path, tmp_path / "report", png=False).html)
    assert len(driver.find_elements(By.CSS_SELECTOR, "#chart .pt-label")) == 6
    assert _label_overlaps(driver) == []
    assert _errors(driver) == []


def test_a_point_two_series_share_is_labelled_once(driver, tmp_path: Path) -> None:
    """Two series with identical points (the quickstart's GPU-resident and HiCache arms at conc 4-16): each shared
    point's label was drawn twice, one just under the other, as if there were two points there. A shared spot is
    labelled once, the label standing for both points (the legend says the series coincide); a series hidden, the
    other's points keep their labels."""
    from selenium.webdriver.common.by import By

    html = write_report(write_coinciding_run(tmp_path / "run"), tmp_path / "report", png=False).html
    _open(driver, html)
    payload = json.loads((tmp_path / "report" / "data.json").read_text())
    none, dram = payload["series"]
    points = payload["points"]

    def labels() -> list[tuple[str, list[str]]]:
        return sorted((t.text, sorted(t.get_attribute("data-ids").split()))
                      for t in driver.find_elements(By.CSS_SELECTOR, "#chart .pt-label"))

    def ids(series: dict[str, Any]) -> dict[int, str]:
        return {p["metrics"]["conc"]: p["id"] for p in points if p["series"] == series["key"]}

    n, d = ids(none), ids(dram)
    tag = {p["id"]: f"c{p['metrics']['conc']} · n{p['requests']['successful']}" for p in points}
    assert tag[n[4]] == tag[d[4]] and tag[n[16]] == tag[d[16]]
    assert labels() == sorted([(tag[n[1]], [n[1]]), (tag[n[4]], sorted([n[4], d[4]])),
                               (tag[n[16]], sorted([n[16], d[16]]))])
    driver.find_element(By.CSS_SELECTOR, f'#legend-items .item[data-series="{none["key"]}"] input').click()
    assert labels() == sorted([(tag[d[4]], [d[4]]), (tag[d[16]], [d[16]])])
    assert _errors(driver) == []


def _keep(png: Path) -> None:
    keep = os.environ.get("LLMSWEEP_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / png.name)


def test_a_real_run_lists_its_policy_refused_job_with_the_reason(driver, tmp_path: Path) -> None:
    """`llmsweep run` on the simulator: the conc-4 job its recipe's policy refuses has no folder, and the dashboard
    reads its reason from what `run` recorded."""
    from selenium.webdriver.common.by import By
    from test_run_support import RECIPES, cli_env, read_json, run_cli

    out = tmp_path / "out"
    proc = run_cli([RECIPES / "policy-max-conc.yaml", "--out", out], cli_env(tmp_path))
    assert proc.returncode == 1, proc.stderr  # partly ran: the conc-2 job beside the refused one
    (refused,) = [o for o in read_json(out / "run.json")["outcomes"] if o["status"] == "refused"]
    _open(driver, out / "report" / "index.html")
    row = driver.find_element(By.CSS_SELECTOR, f'#points-table tr.missing.refused[data-job="{refused["job_id"]}"]')
    assert "refused" in row.text and refused["reasons"][0] in row.find_element(By.CSS_SELECTOR, "td.reason").text
    assert "[grid.max-conc]" in driver.find_element(By.ID, "banner-refused").text
    (tag,) = driver.find_elements(By.CSS_SELECTOR, "#chart .pt-label")
    assert tag.text.startswith("c2 · n")
    assert _errors(driver) == []


def test_cost_and_energy_per_token_are_y_axes_with_lower_is_better_frontiers(driver, tmp_path: Path) -> None:
    """A simulated run carries modelled power and assumed cost: $/Mtok and J/token are selectable on y, each
    titled lower-is-better, its markers at the summaries' values and its frontier the cheaper point's side."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
    from test_run_support import RECIPES, cli_env, job_dirs, read_json, run_cli

    out = tmp_path / "out"
    proc = run_cli([RECIPES / "fixed-sim.yaml", "--out", out], cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    powers = [read_json(j / "summary.json")["power"] for j in job_dirs(out).values()]
    _open(driver, out / "report" / "index.html")
    options = {o.get_attribute("value"): o.text for o in Select(driver.find_element(By.ID, "y-axis")).options}
    assert all("lower is better" in options[k] for k in ("usd_per_mtok_output", "joules_per_output_token"))
    assert "lower is better" not in options["tokens_per_joule"]
    for key, want in (("usd_per_mtok_output", [p["cost"]["usd_per_mtok_output"] for p in powers]),
                      ("joules_per_output_token", [p["joules_per_output_token"] for p in powers])):
        Select(driver.find_element(By.ID, "y-axis")).select_by_value(key)
        ys = sorted(float(m.get_attribute("data-y")) for m in driver.find_elements(By.CSS_SELECTOR, "#chart .marker"))
        assert ys == pytest.approx(sorted(want), rel=1e-4)
        assert "↓ better" in driver.find_element(By.ID, "y-title").text
        fronts = driver.execute_script(
            "return JSON.parse(document.getElementById('llmsweep-data').textContent).frontiers_by_y")[key]
        payload = driver.execute_script("return JSON.parse(document.getElementById('llmsweep-data').textContent)")
        by_id = {p["id"]: p["metrics"][key] for p in payload["points"]}
        for ids in fronts["p90_intvty"].values():  # the cheapest point of each series is on its frontier
            assert min(by_id.values()) in [by_id[i] for i in ids]
    # the drill-down says the assumed price the cost was figured at, and whose it is
    row = driver.find_element(By.CSS_SELECTOR, "#points-table tbody tr[data-id]")
    driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", row)
    WebDriverWait(driver, 30).until(lambda d: "Cost per million" in d.find_element(By.ID, "drilldown").text)
    metrics = {tr.find_elements(By.TAG_NAME, "td")[0].text: tr.find_elements(By.TAG_NAME, "td")[1].text
               for tr in driver.find_elements(By.CSS_SELECTOR, "#drilldown .two table tr")}
    cost = powers[0]["cost"]
    said = metrics["Cost per million output tokens (assumed $/GPU-h)"]
    assert f" at ${cost['usd_per_gpu_hour']:.2f}/GPU-h for mi300x ({cost['source']}, {cost['date']})" in said, said
    assert _errors(driver) == []


@pytest.fixture(scope="module")
def eval_report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three throughput points, the conc-16 one with a failed run-eval eval, and one eval-only result."""
    from llmsweep.metrics.model import EvalBlock, EvalMetric, EvalRun

    points = [SyntheticPoint(synthetic_job(conc=c), speed=1.0, requests=40) for c in (4, 16, 32)]
    points.append(SyntheticPoint(synthetic_job(conc=64, job_id="eval-only-conc64"), speed=1.0, requests=40))
    root = tmp_path_factory.mktemp("chromium-evals")
    run = write_synthetic_run(root / "run", points, run_id="eval-run")
    for job, mode, score in ((points[1].job, "run-eval", 0.41), (points[3].job, "eval-only", 0.93)):
        path = run.path / "jobs" / job["id"] / "summary.json"
        summary = Summary.load(path)
        verdict = "valid" if score >= 0.9 else "invalid"
        reasons = [] if verdict == "valid" else [  # two checks failed: both are said, not the first alone
            "eval gsm8k: exact_match,strict-match = 0.4100 is below the threshold 0.94 (qwen3.5.gsm8k.exact_match)",
            "eval gsm8k: exact_match,flexible-extract = 0.4300 is below the threshold 0.94 "
            "(qwen3.5.gsm8k.exact_match)"]
        if mode == "run-eval":  # a real engine's eval (the synthetic run is simulated): its AL is the realised one
            summary.source = "measured"
        summary.eval = EvalBlock(
            mode=mode, task="gsm8k", dataset="openai/gsm8k", context_length=9472, max_tokens=5376,
            acceptance_length=2.61,
            score=score, score_name="exact_match,strict-match", score_stderr=0.01, verdict=verdict,
            reasons=reasons, harness_version="0.4.13",
            runs=[EvalRun(conc=job["conc"], status="completed", n_samples=1319, command=["python", "-m", "lm_eval"],
                          metrics=[EvalMetric(name="exact_match,strict-match", value=score, stderr=0.01)])])
        path.write_text(json.dumps(summary.dump()), encoding="utf-8")
    return write_report(run.path, root / "report", png=False).html


def test_the_evaluation_view_and_a_failed_eval_on_its_point(driver, eval_report_html: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    drv = driver
    drv.get(eval_report_html.resolve().as_uri())
    WebDriverWait(drv, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    assert _errors(drv) == []
    # The eval-only result is no throughput point; the three throughput points are, one ringed for its failed eval.
    assert len(drv.find_elements(By.CSS_SELECTOR, "#chart .marker")) == 3
    (ring,) = drv.find_elements(By.CSS_SELECTOR, "#chart circle.eval-failed")
    ringed = drv.find_element(By.CSS_SELECTOR, f'#chart .marker[data-id="{ring.get_attribute("data-id")}"]')
    assert ringed.get_attribute("data-x") is not None
    assert drv.find_element(By.ID, "evals").is_displayed()
    rows = drv.find_elements(By.CSS_SELECTOR, "#evals-table tbody tr")
    assert len(rows) == 2
    text = drv.find_element(By.ID, "evals-table").text
    assert "run-eval" in text and "eval-only" in text and "41.0%" in text and "93.0%" in text
    assert "below the threshold 0.94" in text
    # every check that failed, in the eval table and in summary.md's, not the first alone
    assert "strict-match = 0.4100" in text and "flexible-extract = 0.4300" in text, text
    md = (eval_report_html.parent / "summary.md").read_text(encoding="utf-8")
    (md_row,) = [line for line in md.splitlines() if line.startswith("| `") and "run-eval" in line]
    assert "strict-match = 0.4100" in md_row and "flexible-extract = 0.4300" in md_row, md_row
    # the ringed point keeps its throughput verdict, and its row in the points table says why it is ringed
    ringed_id = ring.get_attribute("data-id")
    row = drv.find_element(By.CSS_SELECTOR, f'#points-table tbody tr[data-id="{ringed_id}"]')
    assert row.find_element(By.CSS_SELECTOR, 'td[data-col="verdict"]').text == "valid"
    reason = row.find_element(By.CSS_SELECTOR, 'td[data-col="reason"]').text
    assert "strict-match = 0.4100" in reason and "flexible-extract = 0.4300" in reason, reason
    # the AL column says what it is: read back from the server, the simulator's own model where it served the eval
    assert "AL read back" in text and "realised" not in text
    cells = [c.text for c in drv.find_elements(By.CSS_SELECTOR, '#evals-table td[data-col="acceptance_length"]')]
    assert sorted(cells) == ["2.61", "2.61 (simulated)"], cells


def test_points_reused_from_an_earlier_run_are_drawn_and_say_which_run(driver, tmp_path: Path) -> None:
    """A `run --reuse` run stood three of its four jobs on an earlier run's stored results: the page draws all four,
    the three reused ones as diamonds that name the earlier run (marker, tooltip, table column, drill-down), the one
    measured now as a plain marker, and the reused banner says they are drawn."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    from support.synthetic import write_reusing_run

    store = tmp_path / "store.sqlite"
    run = write_reusing_run(tmp_path, store)
    drv = driver
    _open(drv, write_report(run.path, tmp_path / "report", png=False, store=store).html)
    payload = drv.execute_script("return JSON.parse(document.getElementById('llmsweep-data').textContent)")
    reused_ids = {p["id"] for p in payload["points"] if p["reused"]}
    assert len(reused_ids) == 3 and len(payload["points"]) == 4

    markers = drv.find_elements(By.CSS_SELECTOR, "#chart .marker")
    diamonds = drv.find_elements(By.CSS_SELECTOR, "#chart path.marker.reused")
    assert len(markers) == 4 and {d.get_attribute("data-id") for d in diamonds} == reused_ids
    assert {d.get_attribute("data-reused-from") for d in diamonds} == {"earlier-run"}
    (now,) = [m for m in markers if m.get_attribute("data-id") not in reused_ids]
    assert now.tag_name == "circle"
    assert "reused from earlier runs" in drv.find_element(By.ID, "run-meta").text
    banner = drv.find_element(By.ID, "banner-reused").text
    assert "3 jobs not run" in banner and "drawn as diamonds" in banner and "run earlier-run" in banner

    rows = {r.get_attribute("data-id"): r
            for r in drv.find_elements(By.CSS_SELECTOR, "#points-table tbody tr[data-id]")}
    assert len(rows) == 4 and not drv.find_elements(By.CSS_SELECTOR, "#points-table tr.missing")
    for pid, row in rows.items():
        cell = row.find_element(By.CSS_SELECTOR, 'td[data-col="reused"]').text
        assert cell == ("run earlier-run" if pid in reused_ids else ""), (pid, cell)

    target = diamonds[0]
    ActionChains(drv).move_to_element(target).perform()
    assert "reused from run earlier-run" in drv.find_element(By.ID, "tooltip").text
    drv.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", target)
    drill = drv.find_element(By.ID, "drilldown")
    WebDriverWait(drv, 10).until(lambda d: drill.is_displayed())
    assert "reused from run earlier-run" in drv.find_element(By.ID, "reused-badge").text
    shot = tmp_path / "dashboard_reused.png"
    assert drv.save_screenshot(str(shot))
    _keep(shot)
    assert _errors(drv) == []


def test_a_failed_eval_line_names_a_drawn_point_and_an_eval_only_job_alike(driver, tmp_path: Path) -> None:
    """A run-eval row's eval and an eval-only job's that failed alike are one banner line of two; the line named the
    drawn point (conc 4) and dropped the eval-only job, which has no point, so `×2` named one."""
    from selenium.webdriver.common.by import By

    from llmsweep.metrics.model import EvalBlock, EvalRun

    why = "eval gsm8k: exact_match,strict-match = 0.0000 is below the threshold 0.90 (default.gsm8k.exact_match)"
    points = [SyntheticPoint(synthetic_job(conc=16, job_id="eval-only-conc16"), speed=1.0, requests=8),
              SyntheticPoint(synthetic_job(conc=4, job_id="run-eval-conc4"), speed=1.0, requests=8)]
    run = write_synthetic_run(tmp_path / "run", points, run_id="evals-mixed")
    for point, mode in zip(points, ("eval-only", "run-eval"), strict=True):
        path = run.path / "jobs" / point.job["id"] / "summary.json"
        summary = Summary.load(path)
        if mode == "eval-only":
            summary.validity.verdict, summary.validity.reasons = "invalid", [why]
        summary.eval = EvalBlock(mode=mode, task="gsm8k", dataset="arith.jsonl", context_length=9472,
                                 max_tokens=5376, score=0.0, score_name="exact_match,strict-match",
                                 verdict="invalid", reasons=[why],
                                 runs=[EvalRun(conc=point.job["conc"], status="completed", n_samples=4,
                                               command=["x"])])
        path.write_text(json.dumps(summary.dump()), encoding="utf-8")
    _open(driver, write_report(run.path, tmp_path / "report", png=False).html)
    (line,) = driver.find_elements(By.CSS_SELECTOR, "#banner-eval-failed li")
    assert line.text.startswith("×2") and "conc 4 and" in line.text and "1 more job" in line.text, line.text
    assert "eval-only-conc16" in line.find_element(By.CSS_SELECTOR, "details .ids").get_attribute("textContent")
    assert _errors(driver) == []


def test_a_smoke_eval_is_said_as_smoke_and_ringed_apart_from_a_failed_one(driver, tmp_path: Path) -> None:
    """An eval that passed on too few samples (`smoke`: `--eval-limit`) missed no threshold, yet the page counted it
    under "did not pass" and ringed its point red as a failed eval. It is a smoke result in the smoke banner, with its
    reason, and its point's ring is dashed grey; the run's line counts no failed eval."""
    from selenium.webdriver.common.by import By

    from llmsweep.metrics.model import EvalBlock, EvalRun

    points = [SyntheticPoint(synthetic_job(conc=c), speed=1.0, requests=40) for c in (4, 16)]
    run = write_synthetic_run(tmp_path / "run", points, run_id="smoke-evals")
    path = run.path / "jobs" / points[1].job["id"] / "summary.json"
    summary = Summary.load(path)
    why = "smoke eval: gsm8k scored 6 of its samples (--eval-limit 6); a pass on part of the task is not a result"
    summary.eval = EvalBlock(mode="run-eval", task="gsm8k", dataset="openai/gsm8k", context_length=9472,
                             max_tokens=5376, score=0.95, score_name="exact_match,strict-match", verdict="smoke",
                             reasons=[why], limit=6,
                             runs=[EvalRun(conc=16, status="completed", n_samples=6, command=["x"])])
    path.write_text(json.dumps(summary.dump()), encoding="utf-8")
    _open(driver, write_report(run.path, tmp_path / "report", png=False).html)
    assert "did not pass" not in driver.find_element(By.ID, "run-meta").text
    assert not driver.find_elements(By.CSS_SELECTOR, "#chart circle.eval-failed")
    (ring,) = driver.find_elements(By.CSS_SELECTOR, "#chart circle.eval-smoke")
    assert ring.get_attribute("stroke-dasharray") == "3 2"
    banner = driver.find_element(By.ID, "banner-smoke")
    assert "1 smoke result" in banner.text and "--eval-limit 6" in banner.text, banner.text
    assert not driver.find_elements(By.ID, "banner-eval-failed") or \
        not driver.find_element(By.ID, "banner-eval-failed").is_displayed()
    assert _errors(driver) == []


def test_a_run_of_evals_only_says_so_and_banners_the_eval_that_did_not_pass(driver, tmp_path: Path) -> None:
    """The page of an `--evals-only` run said `no result to plot: the run has no job` and showed no banner."""
    from selenium.webdriver.common.by import By

    from llmsweep.metrics.model import EvalBlock, EvalRun

    point = SyntheticPoint(synthetic_job(conc=16, job_id="eval-only-conc16"), speed=1.0, requests=8)
    run = write_synthetic_run(tmp_path / "run", [point], run_id="evals-run")
    path = run.path / "jobs" / point.job["id"] / "summary.json"
    summary = Summary.load(path)
    why = "eval gsm8k: exact_match,strict-match = 0.0000 is below the threshold 0.90 (default.gsm8k.exact_match)"
    summary.validity.verdict, summary.validity.reasons = "invalid", [why]
    summary.eval = EvalBlock(mode="eval-only", task="gsm8k", dataset="arith.jsonl", context_length=9472,
                             max_tokens=5376, score=0.0, score_name="exact_match,strict-match", verdict="invalid",
                             reasons=[why], runs=[EvalRun(conc=16, status="completed", n_samples=4, command=["x"])])
    path.write_text(json.dumps(summary.dump()), encoding="utf-8")
    _open(driver, write_report(run.path, tmp_path / "report", png=False).html)
    assert "1 eval, 1 did not pass" in driver.find_element(By.ID, "run-meta").text
    assert "the run's results are evals (1 eval" in driver.find_element(By.ID, "chart-empty").text
    banner = driver.find_element(By.ID, "banner-eval-failed")
    assert "1 eval did not pass" in banner.text and "below the threshold 0.90" in banner.text
    assert driver.find_element(By.ID, "evals").is_displayed()
    # a count of samples is whole (it read 4.00)
    assert driver.find_element(By.CSS_SELECTOR, '#evals-table td[data-col="n_samples"]').text == "4"


def test_warned_points_are_marked_in_the_table_and_their_banner_names_series_and_conc(driver, tmp_path: Path) -> None:
    """The simulated-only banner said `— conc 4, 8` where two series have a conc 4 and 8, and the warned points' rows
    read plain `valid` with an empty reason."""
    from selenium.webdriver.common.by import By

    from llmsweep.sim_warnings import engine_refuses

    points = [SyntheticPoint(synthetic_job(conc=c, framework=fw), speed=s, requests=20)
              for fw, s in (("sglang", 1.0), ("vllm", 0.8)) for c in (4, 8)]
    run = write_synthetic_run(tmp_path / "run", points, run_id="warned-run")
    refuses = engine_refuses("engine.known-incompatibility", "HiCache with the direct I/O backend")
    meta = json.loads((run.path / "run.json").read_text())
    meta["outcomes"] = [{"job_id": p.job["id"], "exp_name": "x", "status": "valid", "warnings": [refuses]}
                        for p in points[2:]]
    (run.path / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    _open(driver, write_report(run.path, tmp_path / "report", png=False).html)
    payload = driver.execute_script("return JSON.parse(document.getElementById('llmsweep-data').textContent)")
    labels = {s["key"]: s["label"] for s in payload["series"]}
    warned = {p["id"] for p in payload["points"] if p["warnings"]}
    (vllm,) = {labels[p["series"]] for p in payload["points"] if p["id"] in warned}
    line = driver.find_element(By.CSS_SELECTOR, "#banner-simulated-only ul.reasons li").text
    assert line.endswith(f"— {vllm} · conc 4, 8"), line
    rows = driver.find_elements(By.CSS_SELECTOR, "#points-table tbody tr[data-id]")
    assert len(rows) == 4
    for row in rows:
        verdict = row.find_element(By.CSS_SELECTOR, 'td[data-col="verdict"]').text
        reason = row.find_element(By.CSS_SELECTOR, 'td[data-col="reason"]').text
        if row.get_attribute("data-id") in warned:
            assert verdict == "valid ⚠" and reason == f"⚠ {refuses}", (verdict, reason)
        else:
            assert verdict == "valid" and reason == "", (verdict, reason)


def test_a_missing_metric_value_reads_as_a_dash_in_the_table(driver, report_html: Path) -> None:
    """A point without energy figures showed a blank cell under tokens per joule, as if the page had failed."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")
    driver.get(report_html.resolve().as_uri() + "#y=tokens_per_joule")
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    assert _errors(driver) == []
    assert "Tokens per joule" in driver.find_element(By.CSS_SELECTOR, 'th[data-col="y"]').text
    payload = driver.execute_script("return JSON.parse(document.getElementById('llmsweep-data').textContent)")
    none = {p["id"] for p in payload["points"] if p["metrics"]["tokens_per_joule"] is None}
    assert none
    for row in driver.find_elements(By.CSS_SELECTOR, "#points-table tbody tr[data-id]"):
        if row.get_attribute("data-id") in none:
            assert row.find_element(By.CSS_SELECTOR, 'td[data-col="y"]').text == "–"


def test_latencies_read_in_ms_in_the_tables_as_in_summary_md(driver, report_html: Path) -> None:
    """The points table and the drill-down's metrics showed TTFT and E2E latency in seconds (0.028, 0.00492 s)
    where summary.md and every CLI table show them in ms (28.0): the same figure read two ways."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")
    driver.get(report_html.resolve().as_uri())
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    assert _errors(driver) == []
    md = (report_html.parent / "summary.md").read_text(encoding="utf-8")
    assert "P90 TTFT ms" in md and "P90 E2E latency ms" in md
    for col, label in (("p90_ttft", "P90 TTFT (ms)"), ("p90_e2el", "P90 E2E latency (ms)")):
        assert driver.find_element(By.CSS_SELECTOR, f'#points-table th[data-col="{col}"]').text == label
    payload = driver.execute_script("return JSON.parse(document.getElementById('llmsweep-data').textContent)")
    point = next(p for p in payload["points"] if p["metrics"]["p90_ttft"] is not None)
    row = driver.find_element(By.CSS_SELECTOR, f'#points-table tbody tr[data-id="{point["id"]}"]')
    shown = float(row.find_element(By.CSS_SELECTOR, 'td[data-col="p90_ttft"]').text)
    assert shown == pytest.approx(point["metrics"]["p90_ttft"] * 1000, rel=0.01), shown
    driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", row)
    WebDriverWait(driver, 30).until(lambda d: "P90 TTFT" in d.find_element(By.ID, "drilldown").text)
    metrics = {tr.find_elements(By.TAG_NAME, "td")[0].text: tr.find_elements(By.TAG_NAME, "td")[1].text
               for tr in driver.find_elements(By.CSS_SELECTOR, "#drilldown .two table tr")}
    value, unit = metrics["P90 TTFT"].split()
    assert unit == "ms" and float(value) == pytest.approx(point["metrics"]["p90_ttft"] * 1000, rel=0.01), metrics


@pytest.mark.parametrize("drawn", [True, False], ids=["drawn", "store-not-read"])
def test_a_run_that_reused_every_job_says_so_in_one_banner_line(driver, tmp_path: Path, drawn: bool) -> None:
    """The reused banner said '(the rest were measured now)' when none was, and made one ×1 line per job: each
    reason held its job id."""
    from selenium.webdriver.common.by import By
    from support.synthetic import write_reusing_run

    store = tmp_path / "store.sqlite"
    run = write_reusing_run(tmp_path, store, measured_concs=())
    _open(driver, write_report(run.path, tmp_path / "report", png=False, store=store if drawn else None).html)
    banner = driver.find_element(By.ID, "banner-reused")
    assert "3 jobs not run" in banner.text and "measured now" not in banner.text, banner.text
    (line,) = banner.find_elements(By.CSS_SELECTOR, "ul.reasons li")
    assert line.get_attribute("data-count") == "3" and "reused the valid result of run earlier-run" in line.text


def test_the_drill_down_of_a_point_whose_records_are_cut_short_says_they_are_incomplete(driver, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    run = write_synthetic_run(tmp_path / "run", [SyntheticPoint(synthetic_job(conc=c), requests=20) for c in (1, 4, 8)])
    records = run.jobs[0].records_path
    text = records.read_text()
    records.write_text(text[: len(text) - 40])  # cut mid-line
    run.jobs[2].records_path.write_text("{oops\n[1, 2\n", encoding="utf-8")  # no line readable: said, not `no data`
    html = write_report(run.path, tmp_path / "report", png=False).html
    drv = driver
    drv.get(html.as_uri())
    WebDriverWait(drv, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    from llmsweep.results.point import result_id_for

    said = {0: "records.jsonl is incomplete: 1 line not JSON", 2: "records.jsonl is unreadable: none of its 2"}
    for n, job in enumerate(run.jobs):
        incomplete = n in said
        marker = drv.find_element(By.CSS_SELECTOR, f'#chart .marker[data-id="{result_id_for(run.run_id, job.job_id)}"]')
        drv.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", marker)
        drill = drv.find_element(By.ID, "drilldown")
        WebDriverWait(drv, 10).until(lambda d: d.find_element(By.ID, "drilldown").is_displayed())
        notes = drill.find_elements(By.CSS_SELECTOR, ".records-incomplete")
        assert bool(notes) == incomplete, drill.text[:500]
        if incomplete:
            assert said[n] in notes[0].text, notes[0].text
    assert not _errors(drv)


def test_a_point_measured_with_repeats_is_drawn_once_as_their_mean(driver, tmp_path: Path) -> None:
    """`run --repeats 2` on the simulator: each point is one marker, the mean of its two repeats, and its tooltip and
    drill-down say so (the frontier never picks the luckier repeat)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    from test_run_support import RECIPES, cli_env, run_cli

    out = tmp_path / "run"
    proc = run_cli([RECIPES / "fixed-sim.yaml", "--repeats", "2", "--out", out], cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    drv = driver
    _open(drv, write_report(out, tmp_path / "report", png=False).html)
    markers = drv.find_elements(By.CSS_SELECTOR, "#chart .marker")
    assert len(markers) == 2  # conc 2 and 4, not four results
    ActionChains(drv).move_to_element(markers[0]).perform()
    assert "mean of 2 repeats" in drv.find_element(By.ID, "tooltip").text
    drv.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", markers[0])
    drill = drv.find_element(By.ID, "drilldown")
    WebDriverWait(drv, 10).until(lambda d: drill.is_displayed())
    note = drv.find_element(By.ID, "repeats-note").text
    assert "mean of 2 repeats" in note and "-repeat2" in note
    # provenance times read as dates, not bare Unix seconds (1796434525.2095 said nothing of its unit)
    kv = drv.find_elements(By.CSS_SELECTOR, "#drilldown .kv > div")
    said = {kv[i].text: kv[i + 1].text for i in range(0, len(kv) - 1, 2)}
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(Unix [\d.]+ s\)", said["started_at"]), said
    # the points table says it too, as summary.md's verdict column does (a row read alone is no single measurement)
    cells = drv.find_elements(By.CSS_SELECTOR, '#points-table tbody tr[data-id] td[data-col="verdict"]')
    verdicts = [c.text for c in cells]
    # (⚠: the simulator modelled the recipe's model and GPU with catalog estimates, said in its banner)
    assert verdicts == ["valid ⚠ (mean of 2 repeats)"] * 2, verdicts
    md = (tmp_path / "report" / "summary.md").read_text(encoding="utf-8")
    assert md.count("valid ⚠1 (mean of 2 repeats)") == 2, md
    assert _errors(drv) == []


def test_a_point_partly_reused_is_drawn_once_and_says_which_repeats_came_from_where(driver, tmp_path: Path) -> None:
    """`run --reuse --repeats 3` over a run of two repeats: each point is one marker (it had been two: the reused
    pair as a diamond, the third repeat alone), the run's own, the mean of all three; its tooltip, verdict cell and
    Reused-from column name the run the two reused repeats came from."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from test_run_support import RECIPES, cli_env, run_cli

    env = cli_env(tmp_path)
    first, second = tmp_path / "first", tmp_path / "second"
    for out, more in ((first, ["--repeats", "2"]), (second, ["--reuse", "--repeats", "3"])):
        proc = run_cli([RECIPES / "fixed-sim.yaml", *more, "--out", out, "--no-report"], env)
        assert proc.returncode == 0, proc.stderr[-3000:]
    first_id = json.loads((first / "run.json").read_text())["run_id"]
    drv = driver
    _open(drv, write_report(second, tmp_path / "report", png=False, store=tmp_path / "store.sqlite").html)
    markers = drv.find_elements(By.CSS_SELECTOR, "#chart .marker")
    assert len(markers) == 2 and not drv.find_elements(By.CSS_SELECTOR, "#chart .marker.reused")
    said = f"mean of 3 repeats, 2 reused from run {first_id}"
    ActionChains(drv).move_to_element(markers[0]).perform()
    assert said in drv.find_element(By.ID, "tooltip").text
    verdicts = [c.text for c in drv.find_elements(By.CSS_SELECTOR,
                                                  '#points-table tbody tr[data-id] td[data-col="verdict"]')]
    assert verdicts == [f"valid ⚠ ({said})"] * 2, verdicts  # ⚠: modelled with catalog estimates
    reused = [c.text for c in drv.find_elements(By.CSS_SELECTOR,
                                                '#points-table tbody tr[data-id] td[data-col="reused"]')]
    assert reused == [f"run {first_id}"] * 2, reused
    assert "2 points measured now in part" in drv.find_element(By.ID, "banner-reused").text
    assert _errors(drv) == []


def test_a_point_where_no_request_finished_shows_no_error_ratio_not_zero(driver, tmp_path: Path) -> None:
    """A point stopped while its requests were in flight (none finished) showed `0.0%` under Errors, which reads as
    "no errors": its error ratio is undefined, `–` in the table and in its drill-down."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from llmsweep.metrics import GateConfig, summarise

    run = write_synthetic_run(tmp_path / "run", [SyntheticPoint(synthetic_job(conc=c), requests=20) for c in (1, 4)],
                              run_id="stopped-run")
    job = run.path / "jobs" / synthetic_job(conc=4)["id"]
    records = [json.loads(line) for line in (job / "records.jsonl").read_text().splitlines()]
    records = [{**r, "status": None, "error_class": "cancelled", "error": "cancelled: interrupted by SIGINT",
                "first_token_at": None, "chunk_times": [], "chunk_tokens": [], "completion_tokens": None}
               if r["phase"] == "profiling" else r for r in records]
    (job / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = summarise(job / "records.jsonl", gpus=8, source="simulated", gates=GateConfig(min_submission_s=0))
    (job / "summary.json").write_text(json.dumps(summary.dump()))
    (job / "outcome.json").write_text(json.dumps({"job_id": job.name, "exp_name": job.name, "status": "invalid",
                                                  "reasons": summary.validity.reasons}))
    html = write_report(run.path, tmp_path / "report", png=False).html
    driver.get("about:blank")
    driver.get(html.resolve().as_uri())
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    assert _errors(driver) == []
    assert driver.find_element(By.CSS_SELECTOR, '#points-table th[data-col="error_ratio"]').text == "Errors"
    cells = {row.find_element(By.CSS_SELECTOR, 'td[data-col="conc"]').text:
             row.find_element(By.CSS_SELECTOR, 'td[data-col="error_ratio"]').text
             for row in driver.find_elements(By.CSS_SELECTOR, "#points-table tbody tr[data-id]")}
    assert cells == {"1": "0.0%", "4": "–"}, cells
    row = next(r for r in driver.find_elements(By.CSS_SELECTOR, "#points-table tbody tr[data-id]")
               if r.find_element(By.CSS_SELECTOR, 'td[data-col="conc"]').text == "4")
    driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", row)
    WebDriverWait(driver, 30).until(lambda d: "Error ratio" in d.find_element(By.ID, "drilldown").text)
    metrics = {tr.find_elements(By.TAG_NAME, "td")[0].text: tr.find_elements(By.TAG_NAME, "td")[1].text
               for tr in driver.find_elements(By.CSS_SELECTOR, "#drilldown .two table tr")}
    assert metrics["Error ratio"] == "–", metrics


def test_smoke_repeats_of_one_cause_are_one_banner_line(driver, tmp_path: Path) -> None:
    """`run --repeats 2` with a short window: nine points, each the mean of two smoke repeats, made eighteen ×1 lines
    in the smoke banner (and in summary.md), each reason holding its repeat's number and job id; one cause is one
    line, counted in points, naming their concurrencies."""
    from selenium.webdriver.common.by import By

    options: dict[str, Any] = {"duration_s": 120.0}
    prov: dict[str, Any] = {"launch": {"fingerprint": "launch-a"}, "clock": "virtual", "options": options}
    points = [SyntheticPoint(synthetic_job(conc=c, job_id=f"J-conc{c}{suffix}"), requests=20,
                             provenance={**prov, "options": {**options, "concurrency": c}})
              for c in (1, 4, 8) for suffix in ("", "-repeat2")]
    run = write_synthetic_run(tmp_path / "run", points, run_id="smoke-repeats")
    why = "smoke run: profile window 120 s is shorter than 900 s"
    for p in points:
        path = run.path / "jobs" / p.job["id"] / "summary.json"
        summary = Summary.load(path)
        summary.validity.verdict = "smoke"
        summary.validity.reasons = [why]
        path.write_text(json.dumps(summary.dump()), encoding="utf-8")
    html = write_report(run.path, tmp_path / "report", png=False).html
    _open(driver, html)
    assert len(driver.find_elements(By.CSS_SELECTOR, "#chart .marker")) == 3  # each the mean of its two repeats
    banner = driver.find_element(By.ID, "banner-smoke")
    assert banner.get_attribute("data-count") == "3"
    (line,) = banner.find_elements(By.CSS_SELECTOR, "ul.reasons li")
    assert line.get_attribute("data-count") == "3" and "repeat" not in line.text, line.text
    assert line.text == f"×3 {why} — conc 1, 4, 8", line.text
    md = (html.parent / "summary.md").read_text(encoding="utf-8")
    assert f"- ×3 {why} — " in md and "×1 repeat" not in md, md
    assert _errors(driver) == []


def test_the_reason_cell_of_a_mean_of_repeats_is_one_line_its_detail_on_request(driver, tmp_path: Path) -> None:
    """The Reason cell of a point that is the mean of two smoke repeats restated both repeats' reasons with their
    job ids, twelve lines a row; it says the cause once with its count, and every repeat's reason, job named, is in the
    cell's tooltip and the point's drill-down (which listed its first repeat's alone)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    run = write_repeated_run(tmp_path / "run")
    why = "smoke run: profile window 200 s is shorter than 900 s"
    for art in run.jobs:
        path = art.dir / "summary.json"
        summary = Summary.load(path)
        summary.validity.verdict = "smoke"
        summary.validity.reasons = [why]
        path.write_text(json.dumps(summary.dump()), encoding="utf-8")
    _open(driver, write_report(run.path, tmp_path / "report", png=False).html)
    row = driver.find_elements(By.CSS_SELECTOR, "#points-table tbody tr[data-id]")[0]
    cell = row.find_element(By.CSS_SELECTOR, 'td[data-col="reason"]')
    assert cell.text == f"2 of 2 repeats: {why}", cell.text
    assert cell.get_attribute("title").splitlines() == [f"repeat 1 of 2 (J-conc1) is smoke: {why}",
                                                       f"repeat 2 of 2 (J-conc1-repeat2) is smoke: {why}"]
    driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", row)
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "drilldown").is_displayed())
    listed = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#validity-reasons li")]
    assert listed == cell.get_attribute("title").splitlines(), listed
    assert _errors(driver) == []


def test_series_that_coincide_say_so_in_the_legend(driver, tmp_path: Path) -> None:
    """Two series with identical points (the quickstart's two arms can coincide): the one drawn second hid the
    other, whose markers and frontier were nowhere to be seen. Both are drawn where their values put them, and each
    legend entry says which series it coincides with, on the axes shown."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    html = write_report(write_coinciding_run(tmp_path / "run"), tmp_path / "report", png=False).html
    _open(driver, html)
    items = driver.find_elements(By.CSS_SELECTOR, "#legend-items .item")
    labels = [i.find_element(By.CSS_SELECTOR, "span:not(.sw) > div").text for i in items]
    notes = [i.find_element(By.CSS_SELECTOR, ".coincide").text for i in items]
    assert notes == [f"coincides with {labels[1]} at 2 of its 3 points (identical values; drawn under it)",
                     f"coincides with {labels[0]} at all 2 of its points (identical values; drawn over it)"], notes
    spots = [(m.get_attribute("cx"), m.get_attribute("cy"), m.get_attribute("data-series"))
             for m in driver.find_elements(By.CSS_SELECTOR, "#chart .marker")]
    assert len(spots) == 5 and len({(x, y) for x, y, _ in spots}) == 3  # both drawn, at their own values
    # lines as markers: the series drawn under the other is so with its frontier too (the legend's order)
    keys = [i.get_attribute("data-series") for i in items]
    assert [f.get_attribute("data-series") for f in driver.find_elements(By.CSS_SELECTOR, "#chart .frontier")] == keys
    # said for the axes shown: on another x axis too, re-said
    Select(driver.find_element(By.ID, "x-axis")).select_by_value("p90_ttft")
    assert [i.text for i in driver.find_elements(By.CSS_SELECTOR, "#legend-items .coincide")] == notes
    assert _errors(driver) == []


def test_a_series_of_smoke_points_draws_no_frontier_and_says_why(driver, tmp_path: Path) -> None:
    """A series whose points were all smoke had a frontier drawn through them, as if they were results. It has none,
    on any axis, and its legend entry says why; the smoke banner says smoke points are never on a frontier."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    run = write_smoke_series_run(tmp_path / "run")
    _open(driver, write_report(run, tmp_path / "report", png=False).html)
    sglang, vllm = json.loads((tmp_path / "report" / "data.json").read_text())["series"]
    said = ("no frontier: none of its 3 points is valid (3 smoke); a frontier is drawn from valid points only")
    for axis in ("p90_e2e_norm_intvty", "conc"):
        Select(driver.find_element(By.ID, "x-axis")).select_by_value(axis)
        drawn = [f.get_attribute("data-series") for f in driver.find_elements(By.CSS_SELECTOR, "#chart .frontier")]
        assert drawn == [vllm["key"]], (axis, drawn)
        gaps = {i.get_attribute("data-series"): [n.text for n in i.find_elements(By.CSS_SELECTOR, ".no-frontier")]
                for i in driver.find_elements(By.CSS_SELECTOR, "#legend-items .item")}
        assert gaps == {sglang["key"]: [said], vllm["key"]: []}, gaps
        front = {m.get_attribute("data-id") for m in driver.find_elements(By.CSS_SELECTOR, "#chart .marker.onfront")}
        assert len(front) == 2, front  # vllm's conc 1 and 4; never a smoke point
    assert "never on a frontier" in driver.find_element(By.ID, "banner-smoke").text
    assert _errors(driver) == []


def test_the_drill_down_says_what_its_time_axis_counts(driver, report_html: Path) -> None:
    """The drill-down's charts over time had x ticks (0, 1000, 2000, 3000) and no unit or zero anywhere, and
    `TTFT over time (s)` read as if the seconds were the time axis'."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _open(driver, report_html)
    marker = driver.find_element(By.CSS_SELECTOR, "#chart .marker")
    driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", marker)
    WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "drilldown").is_displayed())
    said = driver.find_element(By.CSS_SELECTOR, "#drilldown #drill-time").text
    assert "seconds from the first profiled request" in said and "before 0" in said, said
    titles = [h.text for h in driver.find_elements(By.CSS_SELECTOR, "#drilldown .mini h4")]
    assert "TTFT (s) over time" in titles, titles
    assert _errors(driver) == []


def test_a_mean_of_repeats_is_drawn_with_its_repeats_spread_as_the_pngs_draw_it(driver, tmp_path: Path) -> None:
    """A point that is the mean of its repeats was drawn as a single result: nothing on the chart said how far its
    repeats lay apart. It has bars on x and y spanning mean ± the repeats' SD, the span the PNGs draw
    (`report.data.spread_bounds`), re-drawn for the axes chosen; the page's key and the tooltip say what they span."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from llmsweep.report.data import REPEATS_SPREAD

    run = write_repeated_run(tmp_path / "run", concs=(1, 4, 16), repeats=3)
    _open(driver, write_report(run, tmp_path / "report", png=False).html)
    points = {p["id"]: p for p in json.loads((tmp_path / "report" / "data.json").read_text())["points"]}
    for x, y in (("p90_e2e_norm_intvty", "tput_per_gpu"), ("p90_ttft", "output_tput_per_gpu"),
                 ("conc", "tput_per_gpu")):
        Select(driver.find_element(By.ID, "x-axis")).select_by_value(x)
        Select(driver.find_element(By.ID, "y-axis")).select_by_value(y)
        drawn = {g.get_attribute("data-id"): {
            axis: [float(bar.get_attribute("data-lo")), float(bar.get_attribute("data-hi"))]
            for axis in ("x", "y") for bar in g.find_elements(By.CSS_SELECTOR, f".spread-{axis}")}
            for g in driver.find_elements(By.CSS_SELECTOR, "#chart g.spread")}
        want = {i: {**({} if x == "conc" else {"x": p["spread"][x]}), "y": p["spread"][y]} for i, p in points.items()}
        assert drawn == want, (x, y, drawn)  # the payload's numbers, as written: one span for page and PNGs
        assert all(lo < p["metrics"][y] < hi for p in points.values() for lo, hi in [p["spread"][y]])
    said = driver.find_element(By.ID, "tag-key").text  # as the PNGs' title says it: a mean's n sums its repeats
    assert said == json.loads((tmp_path / "report" / "data.json").read_text())["tag_key"] and "sums its repeats" in said
    key = driver.find_element(By.ID, "spread-key").text
    assert key.endswith(f"span {REPEATS_SPREAD}.") and "mean of its repeats" in key, key
    ActionChains(driver).move_to_element(driver.find_element(By.CSS_SELECTOR, "#chart .marker")).perform()
    assert f"the bars span {REPEATS_SPREAD}" in driver.find_element(By.ID, "tooltip").text
    assert _errors(driver) == []


def test_single_results_are_drawn_without_spread_bars(driver, report_html: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(driver, report_html)
    assert driver.find_element(By.ID, "tag-key").text == (
        "c = concurrency, n = successful requests measured (ok/finished if some failed)")
    assert driver.find_elements(By.CSS_SELECTOR, "#chart g.spread") == []
    assert driver.find_elements(By.ID, "spread-key") == []


def _rgb(hex_colour: str) -> str:
    """A `#rrggbb` colour as the browser's computed style writes it."""
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def test_the_key_says_smoke_points_are_drawn_faded_as_the_chart_draws_them(driver, report_html: Path) -> None:
    """The page's key said smoke markers are "half-filled", and the smoke banner "drawn half-filled", while the chart
    draws them faded: the whole marker in its series' colour at a fraction of its opacity, inside an outline of
    that colour (the PNGs' key, "■ faded = smoke", said it right). Key and banner now say what is drawn."""
    from selenium.webdriver.common.by import By

    _open(driver, report_html)
    payload = driver.execute_script("return JSON.parse(document.getElementById('llmsweep-data').textContent)")
    colours = {s["key"]: s["color"] for s in payload["series"]}
    series_of = {p["id"]: p["series"] for p in payload["points"]}
    smoke = driver.find_elements(By.CSS_SELECTOR, "#chart .marker.smoke")
    assert len(smoke) == 2
    for marker in smoke:
        style = driver.execute_script("var s = getComputedStyle(arguments[0]); "
                                      "return [s.fill, s.fillOpacity, s.stroke, s.opacity];", marker)
        colour = _rgb(colours[series_of[marker.get_attribute("data-id")]])
        assert style[0] == colour and style[2] == colour, style  # one fill over the whole marker, outlined
        assert 0 < float(style[1]) < 1 and float(style[3]) == 1, style  # faded: the fill alone, see-through
    key = driver.find_element(By.ID, "tag-key").find_element(By.XPATH, "..").text
    assert "faded markers (a pale fill inside their series' outline) are smoke results" in key, key
    banner = driver.find_element(By.ID, "banner-smoke").text
    assert "drawn faded, never on a frontier" in banner, banner
    assert "half" not in key + banner
    assert _errors(driver) == []


def test_a_means_drill_down_counts_its_requests_as_its_timeline_does(driver, tmp_path: Path) -> None:
    """The drill-down of a mean of 3 repeats said `96 request(s) measured` in its badge (every repeat's successful
    requests, as its label's n) and `Request timeline (48 of 48 requests …)` above the timeline it draws (its first
    repeat's records, warm-ups included): two counts of one point that did not agree. The badge now says how many
    of its requests the result whose timeline is drawn measured, and the timeline's title counts that result's
    requests as its summary does, measured apart from warm-ups; a single result's badge and title say one number."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from llmsweep.metrics.model import Summary

    run = write_repeated_run(tmp_path / "run", concs=(16,), repeats=3)
    single = write_synthetic_run(tmp_path / "single", [SyntheticPoint(synthetic_job(conc=4), requests=40)])
    for folder, html in ((run, write_report(run, tmp_path / "report", png=False).html),
                         (single, write_report(single, tmp_path / "single-report", png=False).html)):
        _open(driver, html)
        (point,) = driver.execute_script(
            "return JSON.parse(document.getElementById('llmsweep-data').textContent)")["points"]
        counts = {d.name: Summary.load(d / "summary.json").requests for d in (folder.path / "jobs").iterdir()}
        marker = driver.find_element(By.CSS_SELECTOR, "#chart .marker")
        driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", marker)
        WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "drilldown").is_displayed())
        badge = driver.find_element(By.CSS_SELECTOR, "#drilldown > div").text
        timeline = driver.find_elements(By.CSS_SELECTOR, "#drilldown .mini h4")[0].text
        drawn = counts[point["job_id"]]  # the result whose records the timeline draws: the first repeat's
        assert f"Request timeline ({drawn.successful} measured + {drawn.warmup} warm-up requests;" in timeline
        total = sum(r.successful for r in counts.values())
        if point["repeats"]:
            assert total == 3 * drawn.successful == point["requests"]["successful"]
            assert (f"{count_of(total, 'request')} measured over its 3 repeats, {drawn.successful} of them by result "
                    f"{point['id']} (the timeline below)") in badge, badge
        else:
            assert f"· {count_of(drawn.successful, 'request')} measured" in badge and "repeats" not in badge, badge
    assert _errors(driver) == []


def test_a_modelled_power_figure_is_marked_wherever_the_page_shows_it(driver, tmp_path: Path) -> None:
    """Tokens per joule, energy per token and power per GPU read alike whether GPUs were measured or the simulator's
    power model gave them: nothing beside a value told them apart. A modelled one is marked `(modelled)` in the
    table, the tooltip and the drill-down, and the key says what the mark means; a measured one is not."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from llmsweep.metrics.model import PowerBlock

    points = [SyntheticPoint(synthetic_job(conc=c, job_id=f"{kind}-conc{c}", hardware=hw), requests=20)
              for kind, hw in (("measured", "mi300x"), ("modelled", "mi355x")) for c in (1, 4)]
    run = write_synthetic_run(tmp_path / "run", points)
    for point in points:
        path = run.path / "jobs" / point.job["id"] / "summary.json"
        summary = Summary.load(path)
        measured = point.job["id"].startswith("measured")
        summary.source = "measured" if measured else "simulated"
        summary.power = PowerBlock(source="measured" if measured else "simulated",
                                   backend="nvml" if measured else "sim", power_valid=True, tokens_per_joule=2.5,
                                   joules_per_output_token=0.75, avg_power_w=610.0)
        path.write_text(json.dumps(summary.dump()), encoding="utf-8")
    _open(driver, write_report(run.path, tmp_path / "report", png=False, mix_sources=True).html)
    Select(driver.find_element(By.ID, "y-axis")).select_by_value("tokens_per_joule")
    cells = {r.get_attribute("data-id"): r.find_element(By.CSS_SELECTOR, 'td[data-col="y"]').text
             for r in driver.find_elements(By.CSS_SELECTOR, "#points-table tbody tr[data-id]")}
    payload = driver.execute_script("return JSON.parse(document.getElementById('llmsweep-data').textContent)")
    source = {p["id"]: p["power_source"] for p in payload["points"]}
    assert sorted(source.values()) == ["measured", "measured", "simulated", "simulated"]
    assert {pid: text.endswith("(modelled)") for pid, text in cells.items()} == \
        {pid: s == "simulated" for pid, s in source.items()}, cells
    assert "(modelled)" in driver.find_element(By.ID, "power-key").text
    for pid, kind in source.items():
        marker = driver.find_element(By.CSS_SELECTOR, f'#chart .marker[data-id="{pid}"]')
        ActionChains(driver).move_to_element(marker).perform()
        tip = driver.execute_script("return document.getElementById('tooltip').textContent")  # all of it, seen or not
        assert ("Tokens per joule: 2.50 tok/J" in tip) and ("tok/J (modelled)" in tip) is (kind == "simulated"), tip
        driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", marker)
        drill = driver.find_element(By.ID, "drilldown")
        def showing(_: Any, box: Any = drill, want: str = pid) -> bool:
            return bool(box.get_attribute("data-id") == want)

        WebDriverWait(driver, 10).until(showing)
        shown = {td.get_attribute("data-key"): td.text
                 for td in driver.find_elements(By.CSS_SELECTOR, "#drilldown td.num[data-key]")}
        marked = {key for key, text in shown.items() if text.endswith("(modelled)")}
        assert marked == ({"tokens_per_joule", "joules_per_output_token", "avg_power_w"}
                          if kind == "simulated" else set()), shown
    assert _errors(driver) == []
