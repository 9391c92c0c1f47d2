"""``concur serve`` in a real browser: Chromium (Debian's ``chromium`` and ``chromium-driver``) driven
by Selenium, against a server on a loopback port the OS picks. One browser and one server for the
module. Skipped when Chromium or its driver is missing, except under ``CI=true``, where that fails.

The page's workbook download is saved by the browser and recalculated by LibreOffice (skipped
without ``soffice`` locally, failed under ``CI=true``).

Every expected number is computed here by the Python API for the same inputs the page was given:
the page must show what ``concur solve`` and ``concur plan`` answer, whatever the model gives.
Waits are on the page's own state (``data-state="done"`` and the command line of the question
asked), never on a clock; the timeout only bounds a broken page.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

import concur
from concur.cli.givens import default_scenario
from concur.cli.web import questions
from concur.cli.web.server import running

FLEET = ["llm_fleet"]
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
pytestmark = pytest.mark.slow_check  # a browser per worker: its own step while iterating (-m "not slow_check")
WAIT_S = 120  # bounds a page that never answers; an answering page is waited for by its state


def _missing(message: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message}, and CI=true requires it", pytrace=False)
    pytest.skip(message)


def _browser_paths() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not (chromium and driver):
        _missing("Chromium and chromedriver are not on PATH (apt-get install chromium chromium-driver)")
    try:
        import selenium  # noqa: F401 - the test extra installs it
    except ImportError:
        _missing("selenium is not installed (pip install -e '.[test]')")
    return str(chromium), str(driver)


@pytest.fixture(scope="module")
def server():
    with running() as srv:
        yield srv


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium, driver = _browser_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not look for drivers online
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    drv = webdriver.Chrome(service=Service(driver), options=options)
    drv.downloads = tmp_path_factory.mktemp("downloads")
    drv.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(drv.downloads)})
    try:
        yield drv
    finally:
        drv.quit()


def _wait(browser, condition):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, WAIT_S, poll_frequency=0.05).until(lambda d: condition(d))


def _answered(browser, view: str, *words: str):
    """Wait until ``view`` shows the answer to the question whose command line holds ``words``."""

    def done(d):
        box = d.find_element("id", f"{view}-answer")
        state = box.get_attribute("data-state")
        command = box.get_attribute("data-command") or ""
        if state == "done" and all(w in command for w in words):
            return box
        if state == "error" and "error" in words:
            return box
        return False

    return _wait(browser, done)


def _set(browser, field_id: str, value: str) -> None:
    field = browser.find_element("id", field_id)
    field.clear()
    field.send_keys(value)
    browser.execute_script("arguments[0].dispatchEvent(new Event('change', {bubbles: true}))", field)


def _fleet_given(**changes):
    given = {k: v for k, v in default_scenario(FLEET).items() if k in questions.FLEET_FIELDS}
    given.update(changes)
    return given


def _open(browser, server, view: str):
    browser.get(f"{server.url}#{view}")
    browser.refresh()  # a hash-only change keeps the page; start each test from a fresh one
    return _answered(browser, view)


def test_the_fleet_page_shows_concur_solves_replicas_as_arrival_rate_changes(browser, server):
    _open(browser, server, "fleet")
    _set(browser, "fleet-field-arrival_rate", "80")
    box = _answered(browser, "fleet", "arrival_rate=80")
    shown = box.find_element("id", "fleet-answer-replicas")
    sol = concur.solve(list(questions.FLEET_ANSWERS), _fleet_given(arrival_rate=80), FLEET)
    assert float(shown.get_attribute("data-value")) == sol.value("replicas")
    assert shown.text == f"{int(sol.value('replicas'))} replica"
    assert browser.find_element("id", "fleet-text").text.startswith("replicas")  # what `concur solve` prints
    assert "note: assumed utilization" in browser.find_element("id", "fleet-text").text
    # the URL holds the question: a reload asks it again
    browser.refresh()
    box = _answered(browser, "fleet", "arrival_rate=80")
    assert browser.find_element("id", "fleet-field-arrival_rate").get_attribute("value") == "80"
    assert float(box.find_element("id", "fleet-answer-replicas").get_attribute("data-value")) == sol.value("replicas")


def test_solving_for_arrival_rate_with_a_budget_gives_the_cli_answer(browser, server):
    _open(browser, server, "fleet")
    _set(browser, "fleet-field-monthly_budget", "100000")
    browser.find_element("id", "fleet-find-arrival_rate").click()
    box = _answered(browser, "fleet", "--find arrival_rate,", "monthly_budget=100000")
    given = _fleet_given(monthly_budget=100000)
    del given["arrival_rate"]
    sol = concur.solve(["arrival_rate", *questions.FLEET_ANSWERS], given, FLEET)
    shown = float(box.find_element("id", "fleet-answer-arrival_rate").get_attribute("data-value"))
    assert shown == pytest.approx(sol.value("arrival_rate"), rel=1e-9)
    assert browser.find_element("id", "fleet-field-arrival_rate").get_attribute("disabled") is not None


def test_a_bad_input_shows_one_error_line_beside_its_field(browser, server):
    _open(browser, server, "fleet")
    _set(browser, "fleet-field-arrival_rate", "lots")
    _answered(browser, "fleet", "error")
    beside = browser.find_element("id", "fleet-error-arrival_rate")
    assert beside.text == "error: 'lots' is not a number with an optional unit (variable 'arrival_rate')"
    lines = [e.text for e in browser.find_elements("css selector", ".field-error, .error-line") if e.text.strip()]
    assert lines == [beside.text]  # one line, beside its field, nothing else
    assert browser.find_element("id", "fleet-field-arrival_rate").get_attribute("aria-invalid") == "true"


def test_the_plan_explorer_lists_concur_plans_cheapest_row_first(browser, server):
    from concur.analysis.fleet_plan import plan_fleet
    from concur.cli.commands.plan import question_from

    _open(browser, server, "plan")
    question, _ = question_from(tuple(f"{k}={v}" for k, v in _plan_given().items()), None)
    cheapest = plan_fleet(question).feasible[0]
    row = browser.find_element("id", "plan-row-0")
    cells = {c.get_attribute("data-column"): c.text for c in row.find_elements("css selector", "td")}
    config = cheapest.config
    assert (cells["gpu"], cells["tp"], cells["w/kv"], cells["engine"], cells["replicas"]) == (
        config.gpu,
        str(config.tp),
        f"{config.weight_dtype}/{config.kv_dtype}",
        config.engine,
        str(cheapest.replicas),
    )
    # sortable: a click on $/month twice sorts most expensive first; filterable by GPU; rejected rows say why
    header = browser.find_element("css selector", "th[data-column='$/month']")
    header.click()
    header = browser.find_element("css selector", "th[data-column='$/month']")
    header.click()
    top = browser.find_element("css selector", "#plan-row-0 td[data-column='$/month']").text
    assert float(top.replace(",", "")) >= float(cells["$/month"].replace(",", ""))
    browser.find_element("id", "plan-rejected").click()
    reasons = [c.text for c in browser.find_elements("css selector", "tr.rejected td[data-column='reason']")]
    assert reasons and all(reasons)


def _plan_given():
    return {
        k: v
        for k, v in default_scenario(FLEET).items()
        if k in ("model", "arrival_rate", "input_tokens", "output_tokens")
    }


def test_the_page_requests_nothing_from_elsewhere_and_the_screenshot_for_the_docs(browser, server, tmp_path):
    """Every request the page made went to this server; the fleet page's screenshot is a PNG (and
    becomes docs/img/serve-fleet.png when CONCUR_UPDATE_DOCS=1)."""
    import json

    _open(browser, server, "fleet")
    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    assert urls and all(u.startswith(server.url) or u.startswith(("data:", "blob:")) for u in urls), urls
    shot = tmp_path / "serve-fleet.png"
    assert browser.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24])[0] >= 800
    if os.environ.get("CONCUR_UPDATE_DOCS") == "1":
        shutil.copy(shot, DOCS_IMG / "serve-fleet.png")


def test_the_pareto_chart_draws_the_plans_points_and_a_row_opens_in_the_fleet_page(browser, server):
    _open(browser, server, "plan")
    dots = browser.find_elements("css selector", "#plan-chart-svg circle.dot")
    feasible = browser.find_elements("css selector", "#plan-table tr.feasible")
    assert dots and len(dots) == len(feasible)
    assert browser.find_elements("css selector", "#plan-chart-svg circle.front-dot")
    first = browser.find_element("css selector", "#plan-row-0")
    cells = {c.get_attribute("data-column"): c.text for c in first.find_elements("css selector", "td")}
    first.find_element("link text", "open").click()
    box = _answered(browser, "fleet", f"gpu={cells['gpu']}", f"tp={cells['tp']}", f"--set engine={cells['engine']}")
    assert box.find_element("id", "fleet-answer-replicas").text == f"{cells['replicas']} replica"


@pytest.mark.libreoffice
def test_the_workbook_download_opens_and_recalculates_to_the_shown_answer(browser, server):
    from concur.excel.recalc import recalculate_values

    if not shutil.which("soffice"):
        _missing("LibreOffice (soffice) is not on PATH")
    _open(browser, server, "fleet")
    _set(browser, "fleet-field-arrival_rate", "120")
    box = _answered(browser, "fleet", "arrival_rate=120")
    shown = float(box.find_element("id", "fleet-answer-replicas").get_attribute("data-value"))
    target = browser.downloads / "answer.xlsx"
    browser.find_element("id", "fleet-download-answer-xlsx").click()
    _wait(browser, lambda d: target.exists() and target.stat().st_size > 0)
    assert recalculate_values(target, ["replicas"])["replicas"] == shown


def test_the_curves_view_draws_concur_sweeps_points(browser, server):
    import json

    from concur.api import load_model
    from concur.sweep.vector import range_values, sweep

    _open(browser, server, "curve")
    browser.find_element("id", "curve-find-tokens_per_s_per_user").click()  # draw one series only
    box = _answered(browser, "curve", "--find tokens_per_s_per_gpu ")
    dots = box.find_elements("css selector", "#curve-chart-tokens_per_s_per_gpu circle")
    model = load_model("llm_throughput")
    x = range_values(1.0, 256.0, 64, True)
    given = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "input_tokens": 1024, "output_tokens": 2048}
    values = sweep(model, {"concurrency": x}, given, ["tokens_per_s_per_gpu"])["tokens_per_s_per_gpu"]
    answered = [i for i, v in enumerate(values.ravel()) if v == v]  # not NaN
    assert sorted(int(d.get_attribute("data-index")) for d in dots) == answered
    label = box.find_element("css selector", "#curve-chart-tokens_per_s_per_gpu figcaption").text
    assert label == "tokens_per_s_per_gpu [token/s] against concurrency [request]"
    assert json.loads(browser.execute_script("return decodeURIComponent(location.hash.split('q=')[1])"))["log"] is True
