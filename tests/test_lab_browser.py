"""The lab in a real browser: start `streamlit run`, drive it with Playwright in Debian's Chromium.

Sends a message, fast-forwards a day, opens every page and fails on any Streamlit exception box.
Screenshots land in build/screenshots/ for a human look. Only 127.0.0.1 is touched.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "build" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
PAGES = [("chat", "Chat"), ("prompt", "What the model saw"), ("memory", "Memory"), ("timeline", "Memory over time"),
         ("scoring", "Scoring"),
         ("curves", "Curves"), ("settings", "Settings")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited early with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"streamlit did not become healthy at {url} within {timeout}s")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_PROXY": "127.0.0.1,localhost"}
    env.pop("DEEPSEEK_API_KEY", None)
    env.pop("OPENAI_API_KEY", None)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "lab/streamlit_app.py", "--server.headless", "true",
             "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(url, proc)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]


@pytest.fixture(scope="module")
def page(server):
    if not Path(CHROMIUM).exists():
        if os.environ.get("MEMLAB_REQUIRE_BROWSER"):  # CI installs it: missing is a failure there
            pytest.fail(f"{CHROMIUM} is missing but MEMLAB_REQUIRE_BROWSER is set")
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )
        context = browser.new_context(viewport={"width": 1500, "height": 2000})
        pg = context.new_page()
        pg.set_default_timeout(20_000)
        yield pg
        context.close()
        browser.close()


def _settle(pg) -> None:
    """Wait until the script run finished (stApp's script state) and charts had time to draw."""
    pg.wait_for_timeout(300)  # let the rerun request reach the server
    pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
    pg.wait_for_load_state("networkidle")
    pg.wait_for_timeout(500)


def _no_exception(pg, where: str) -> None:
    boxes = pg.locator('[data-testid="stException"]')
    if boxes.count():
        raise AssertionError(f"Streamlit exception on {where}: {boxes.first.inner_text()[:2000]}")


def _shot(pg, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_chat_fast_forward_and_every_page(server, page):
    pg = page
    pg.goto(server)
    _settle(pg)
    pg.get_by_text("scripted models (offline stand-ins)").first.wait_for()
    pg.get_by_role("button", name="+1 min").wait_for()  # the widgets, not their loading skeletons
    pg.locator('[data-testid="stChatInputTextArea"]').wait_for()
    _settle(pg)
    _no_exception(pg, "first load")
    _shot(pg, "00-chat-empty")

    for text in ("Hi, I'm Alice and I live in Lisbon.", "I prefer window seats when I fly."):
        box = pg.locator('[data-testid="stChatInputTextArea"]')
        box.fill(text)
        box.press("Enter")
        _settle(pg)
        pg.get_by_text(text).first.wait_for()
    _no_exception(pg, "chat")

    pg.get_by_role("button", name="+1 day").click()
    _settle(pg)
    pg.get_by_text("Tue 2026-01-06").first.wait_for()
    box = pg.locator('[data-testid="stChatInputTextArea"]')
    box.fill("Where do I live?")
    box.press("Enter")
    _settle(pg)
    _no_exception(pg, "chat after +1 day")
    _shot(pg, "01-chat-after-day")

    for slug, title in PAGES:
        pg.locator('[data-testid="stSidebarNav"]').get_by_text(title, exact=True).click()
        _settle(pg)
        pg.get_by_role("heading", name=title).first.wait_for()
        _no_exception(pg, title)
        _shot(pg, f"page-{slug}")


def test_memory_trace_and_memory_over_time_render(server, page):
    """A fact said in chat shows up in the memory trace of a later reply; after a fast-forward the
    Memory over time chart draws (a canvas or svg in the vega-embed element). Any console error fails.
    Screenshots at 1500x1000 and 1280x800."""
    pg = page
    errors: list[str] = []

    def _on_console(msg) -> None:
        if msg.type == "error":
            errors.append(msg.text)

    pg.on("console", _on_console)
    pg.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    try:
        pg.set_viewport_size({"width": 1500, "height": 1000})
        pg.goto(server)
        _settle(pg)
        box = pg.locator('[data-testid="stChatInputTextArea"]')
        box.wait_for()
        fact = "I work as a marine biologist in Porto."
        box.fill(fact)
        box.press("Enter")
        _settle(pg)
        pg.get_by_text(fact).first.wait_for()
        pg.get_by_role("button", name="+1 day").click()  # the gate opens: the fact is extracted
        _settle(pg)
        box = pg.locator('[data-testid="stChatInputTextArea"]')
        box.fill("Where do I work?")
        box.press("Enter")
        _settle(pg)
        _no_exception(pg, "chat with a memory question")
        trace = pg.locator('[data-testid="stExpander"]').filter(has_text="memory trace").last
        trace.wait_for()
        trace.locator("summary").click()
        _settle(pg)
        text = trace.inner_text()
        assert "Porto" in text and "biologist" in text, text[:2000]
        _shot(pg, "10-memory-trace-1500x1000")

        # correct the record by hand on Memory; the next reply's trace carries the correction
        pg.locator('[data-testid="stSidebarNav"]').get_by_text("Memory", exact=True).click()
        _settle(pg)
        content = pg.locator('textarea[aria-label="Content"]')
        content.wait_for()
        corrected = "The user works as a marine biologist in Aveiro."
        content.fill(corrected)
        content.press("Tab")
        _settle(pg)
        pg.get_by_role("button", name="Save edit").click()
        _settle(pg)
        _no_exception(pg, "edit a record by hand")
        pg.get_by_text("edited: a new version supersedes it").first.wait_for()
        pg.locator('[data-testid="stSidebarNav"]').get_by_text("Chat", exact=True).click()
        _settle(pg)
        box = pg.locator('[data-testid="stChatInputTextArea"]')
        box.fill("Where do I work?")
        box.press("Enter")
        _settle(pg)
        trace = pg.locator('[data-testid="stExpander"]').filter(has_text="memory trace").last
        trace.wait_for()
        trace.locator("summary").click()
        _settle(pg)
        text = trace.inner_text()
        assert "Aveiro" in text, text[:2000]
        _shot(pg, "13-corrected-trace-1500x1000")

        pg.get_by_role("button", name="+1 h").click()
        _settle(pg)
        pg.locator('[data-testid="stSidebarNav"]').get_by_text("Memory over time", exact=True).click()
        _settle(pg)
        pg.get_by_role("heading", name="Memory over time").first.wait_for()
        _no_exception(pg, "Memory over time")
        drawn = pg.locator('[data-testid="stVegaLiteChart"] .vega-embed canvas, '
                           '[data-testid="stVegaLiteChart"] .vega-embed svg, .vega-embed canvas, .vega-embed svg')
        drawn.first.wait_for(state="visible")
        assert drawn.count() >= 1
        _shot(pg, "11-memory-over-time-1500x1000")
        pg.set_viewport_size({"width": 1280, "height": 800})
        _settle(pg)
        _shot(pg, "12-memory-over-time-1280x800")
    finally:
        pg.remove_listener("console", _on_console)
        pg.set_viewport_size({"width": 1500, "height": 2000})
    assert not errors, errors


def test_scenarios_and_tune_charts_draw(server, page):
    """The probe grid and the tune frontier chart draw after a small run (screenshots for a look)."""
    pg = page
    pg.set_viewport_size({"width": 1500, "height": 1000})
    try:
        pg.goto(server)
        _settle(pg)
        for title, button, chart in (("Scenarios", "Run comparison", "Per probe and keyword"),
                                     ("Tune", "Run sweep", "Recall against payload")):
            pg.locator('[data-testid="stSidebarNav"]').get_by_text(title, exact=True).click()
            _settle(pg)
            pg.get_by_role("button", name=button).click()
            _settle(pg)
            _no_exception(pg, title)
            pg.locator(".vega-embed").filter(has_text=chart).first.wait_for(timeout=40_000)
            pg.locator(".vega-embed").filter(has_text=chart).first.scroll_into_view_if_needed()
            pg.wait_for_timeout(300)
            _shot(pg, f"20-{title.lower()}-chart")
    finally:
        pg.set_viewport_size({"width": 1500, "height": 2000})
