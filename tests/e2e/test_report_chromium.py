"""The dashboard in a real browser: headless Chromium via Selenium, offline, from file://.

Checks what a reader relies on: the page loads without console errors, every series and point is drawn, the x-axis
selector really changes the x values, a point opens its drill-down, and a screenshot can be taken.
Set LLMSWEEP_SCREENSHOT_DIR to keep the screenshots.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

from llmsweep.report import write_report

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
    run = write_synthetic_run(root / "run", points, run_id="browser-run", expected_extra=("never-ran",))
    return write_report(run, root / "report", png=False).html


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


def _errors(drv) -> list[dict]:  # type: ignore[no-untyped-def]
    return [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]


def test_dashboard_in_headless_chromium(driver, report_html: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
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
    assert "never-ran" in drv.find_element(By.ID, "missing-banner").text
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
