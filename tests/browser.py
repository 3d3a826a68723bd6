"""A real browser for the HTML report's tests: Debian's headless Chromium, driven by selenium.

Nothing here downloads a browser or a driver: the driver is ``/usr/bin/chromedriver`` (Debian's
``chromium-driver``) or ``$CHROMEDRIVER``. Without them the browser tests skip with a message
saying how to enable them, unless ``IB_REQUIRE_BROWSER=1`` (set by ``.ci/run``) makes that a
failure.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

import pytest

ENABLE = ("install Debian's chromium and chromium-driver (apt-get install chromium chromium-driver) "
          "and the test extra (pip install -e '.[test]'), or run `bash .ci/run`")


def _driver_path() -> Optional[str]:
    return os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None)


def _unavailable(reason: str) -> None:
    message = f"browser tests cannot run: {reason}; to enable them, {ENABLE}"
    if os.environ.get("IB_REQUIRE_BROWSER") == "1":
        pytest.fail(message)
    pytest.skip(message)


def require_browser() -> tuple[str, str]:
    """(chromium, chromedriver) paths; skips (or fails under IB_REQUIRE_BROWSER=1) without them."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        _unavailable("selenium is not installed")
    driver_path = _driver_path()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if driver_path is None or browser is None:
        _unavailable("no chromium / chromedriver on PATH")
    return browser, driver_path


def start_browser() -> Any:
    """A headless Chromium with its console log kept (``driver.get_log("browser")``).

    Its profile is a fresh temporary folder, removed by the driver's ``quit()``.
    """
    browser, driver_path = require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    profile = tempfile.mkdtemp(prefix="ib-chromium-")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-quic", "--window-size=1400,1800", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    except BaseException:
        shutil.rmtree(profile, ignore_errors=True)
        raise
    quit_browser = driver.quit

    def quit_and_remove_profile() -> None:
        try:
            quit_browser()
        finally:
            shutil.rmtree(profile, ignore_errors=True)

    driver.quit = quit_and_remove_profile
    driver.set_page_load_timeout(60)
    driver.implicitly_wait(0)
    return driver


def console_errors(driver: Any) -> list[str]:
    """The page's console messages at error level (SEVERE) since the last call."""
    return [entry["message"] for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
