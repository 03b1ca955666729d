"""Tier 4: the Temporal UI, checked in a real browser — a TTL timer is visible, with its summary.

A dev server started WITH its UI (this module's own fixture; the session server is headless)
runs a TTL workflow for a finished Job with a long TTL through a worker and bridge on kubesim.
Headless Chromium (Debian's ``chromium`` + ``chromium-driver``, driven by Selenium; nothing is
downloaded) opens the workflow's page and finds, in the UI's timeline, the timer row carrying
the summary ``TTL of Job ns/name expires …`` drawn as still running (the UI draws a pending
event's line dashed and animated). The screenshot is always taken; it replaces
docs/ui-ttl-timer.png (shown in docs/cli.md) when that is missing or ``BATCHD_UPDATE_SCREENSHOT=1`` (so an ordinary
test run leaves the committed picture, and the working tree, alone).

Without Chromium the test is skipped locally; under CI (``CI`` set) it must run.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from kube.client import Kube
from tests.conftest import eventually, require, running, utcnow
from tests.k8s import create_job, finish_job, second
from worker.dev import ephemeral_dev_server, free_port

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "ui-ttl-timer.png"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1400,1300"]


def _require_browser() -> None:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package")
    require(missing, "apt-get install chromium chromium-driver; pip install -e '.[test]'")


@pytest_asyncio.fixture(scope="module")
async def ui_env() -> AsyncIterator[tuple[WorkflowEnvironment, int]]:
    """A dev server with its UI on a free port, and that port."""
    _require_browser()
    ui_port = free_port()
    env = await ephemeral_dev_server(ui=True, ui_port=ui_port)
    async with env:
        yield env, ui_port


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless Chromium with a fresh profile, driven through Debian's chromedriver."""
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="batchd-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    driver = webdriver.Chrome(options=opts, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def pending_timer_row(driver: Any, summary: str) -> Any:
    """The timeline row whose label is ``summary`` and whose line is drawn as pending, or None."""
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(
        By.XPATH, f"//span[normalize-space(.)={_xpath_literal(summary)}]/ancestor::li[1]")
    for row in rows:
        # The UI draws a still-running event (here: a started, unfired timer) with a dashed,
        # animated line in the event type's colour; a fired timer's line is solid.
        lines = row.find_elements(By.CSS_SELECTOR, ".tl-line.tl-line--dashed.tl-line--animate")
        if any("workflow-timer" in (line.get_attribute("style") or "") for line in lines):
            return row
    return None


def _xpath_literal(text: str) -> str:
    assert "'" not in text
    return f"'{text}'"


def screenshot_path(tmp_path: Path) -> Path:
    """docs/ui-ttl-timer.png when it is to be (re)made, else a scratch file."""
    if os.environ.get("BATCHD_UPDATE_SCREENSHOT") == "1" or not SCREENSHOT.exists():
        return SCREENSHOT
    return tmp_path / SCREENSHOT.name


async def test_the_ui_shows_a_sleeping_ttl_workflow_with_its_pending_timer_summary(
        ui_env: tuple[WorkflowEnvironment, int], kube: Kube, browser: Any, tmp_path: Path) -> None:
    env, ui_port = ui_env
    namespace, task_queue = f"team-a-{uuid.uuid4().hex[:4]}", f"tq-{uuid.uuid4()}"
    kube.request("POST", "/api/v1/namespaces",
                 body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    async with running(env.client, kube, task_queue, namespace):
        uid = create_job(kube, namespace, "etl-nightly", ttl=6 * 3600)["metadata"]["uid"]
        finish_job(kube, namespace, "etl-nightly", second(utcnow()))
        wid = f"job-ttl/{namespace}/etl-nightly/{uid}"

        async def expiry() -> str | None:
            try:
                state = await env.client.get_workflow_handle(wid).query("describe")
            except RPCError:  # not started yet: the bridge is still listing
                return None
            return state["expireAt"]  # type: ignore[no-any-return]

        expire_at = await eventually(expiry, what="the TTL workflow's expiry")
        summary = f"TTL of Job {namespace}/etl-nightly expires {expire_at}"

        url = f"http://127.0.0.1:{ui_port}/namespaces/default/workflows/{urllib.parse.quote(wid, safe='')}"
        # Selenium blocks: run it in threads so this loop keeps serving the worker and bridge.
        await asyncio.to_thread(browser.get, url)
        row = await eventually(lambda: asyncio.to_thread(pending_timer_row, browser, summary), timeout=180,
                               interval=0.5, what=f"a pending timer {summary!r} in the UI timeline")

        page = await asyncio.to_thread(lambda: browser.find_element("tag name", "body").text)
        assert wid in page.replace("\n", "")  # the heading wraps the long id
        assert "RUNNING" in page and "TTLAfterFinished" in page
        assert await asyncio.to_thread(row.is_displayed)  # within the 1400x1300 window: in the picture
        shot = screenshot_path(tmp_path)
        shot.parent.mkdir(exist_ok=True)
        assert await asyncio.to_thread(browser.save_screenshot, str(shot))
        assert shot.stat().st_size > 10_000
