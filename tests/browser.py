"""Headless Chromium for the viewer's tests: Debian's ``chromium`` and ``chromium-driver`` driven by Selenium.

Nothing is downloaded: the browser and its driver are the system's, and Selenium is told where they
are (so its driver manager never runs). Without them the tests skip, except under ``CI=true``, where
a missing browser is a failure: CI installs it (``.ci/run``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("SE_OFFLINE", "true")  # Selenium never looks anything up on the network
os.environ.setdefault("SE_AVOID_STATS", "true")

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

from tests.missing import skip_or_fail

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1100,900",
)


def find_browser() -> tuple[str, str]:
    """The paths of Chromium and its driver; skip (fail under CI) when either is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        message = "headless Chromium is not installed: apt-get install chromium chromium-driver"
        skip_or_fail(message)
    return browser, driver


def start_chromium(profile: Path) -> webdriver.Chrome:
    """A fresh headless Chromium (its own profile folder) whose network events can be read back."""
    browser, driver = find_browser()
    options = Options()
    options.binary_location = browser
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    driver = start_chromium(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: webdriver.Chrome, condition: Callable[[webdriver.Chrome], Any], what: str) -> Any:
    """What ``condition`` returns once it is truthy; fails saying ``what`` did not happen (a generous limit)."""
    return WebDriverWait(driver, 30, poll_frequency=0.1).until(condition, f"the page did not show {what}")


def requested_urls(driver: webdriver.Chrome) -> list[str]:
    """The URLs the page requested since the last call (from Chromium's performance log)."""
    import json

    urls = []
    for entry in driver.get_log("performance"):
        event = json.loads(entry["message"])["message"]
        if event.get("method") == "Network.requestWillBeSent":
            urls.append(event["params"]["request"]["url"])
    return urls
