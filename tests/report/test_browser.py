"""The report in a real headless browser (Debian's chromium, driven through chromedriver).

Builds a tiny report, opens it from disk the way a reader does (file://), and checks that
the page loads without console errors, that every figure's image decodes and is laid out
with a non-zero size, and takes a full-page screenshot. A control page with a script error
and a broken image shows that the checks can fail.

Skipped, with the reason, when chromium, chromedriver or selenium is missing, unless
``DPFAIR_REQUIRE_BROWSER=1`` (set by ``.ci/run`` once it has installed chromium): then a
missing browser is a failure, so CI cannot pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpfair.report import ReportConfig, build_report

CHROMIUM = os.environ.get("DPFAIR_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = (
    os.environ.get("DPFAIR_CHROMEDRIVER") or shutil.which("chromedriver")
    or "/usr/bin/chromedriver"
)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

_JS_IMAGES = """
const done = arguments[arguments.length - 1];
const imgs = Array.from(document.images);
Promise.all(imgs.map(i => i.decode().then(() => true, () => false))).then(decoded => {
  done(imgs.map((img, k) => {
    const box = img.getBoundingClientRect();
    return {alt: img.alt, decoded: decoded[k], complete: img.complete,
            naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight,
            shownWidth: box.width, shownHeight: box.height,
            inFigure: img.closest('figure') !== null};
  }));
});
"""


def _require_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip install -e '.[dev]')")
    if not missing:
        return
    reason = (f"headless browser test needs {', '.join(missing)}; on Debian: apt-get install "
              "chromium chromium-driver")
    if os.environ.get("DPFAIR_REQUIRE_BROWSER") == "1":
        pytest.fail(f"DPFAIR_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One headless chromium for the module, with a fresh profile and console logging."""
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    root = tmp_path_factory.mktemp("chromium")
    options = Options()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={root / 'profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=CHROMEDRIVER, log_output=str(root / "chromedriver.log"))
    old = os.environ.get("SE_OFFLINE")
    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager look for downloads
    try:
        driver = webdriver.Chrome(options=options, service=service)
    finally:
        if old is None:
            os.environ.pop("SE_OFFLINE", None)
        else:
            os.environ["SE_OFFLINE"] = old
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _open(driver: Any, page: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Load ``page``; return its console errors and the state of every image."""
    driver.get_log("browser")  # drop anything logged before this page
    driver.get(page.resolve().as_uri())
    assert driver.execute_script("return document.readyState") == "complete"
    images = driver.execute_async_script(_JS_IMAGES)
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    return errors, images


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE, "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


@pytest.fixture(scope="module")
def report_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_report(tmp_path_factory.mktemp("report"), seed=0, config=ReportConfig.tiny())


def test_report_renders_in_headless_chromium(browser: Any, report_page: Path,
                                             tmp_path: Path) -> None:
    errors, images = _open(browser, report_page)
    assert errors == [], f"console errors: {errors}"
    assert browser.title == "dpfair report"
    n_figures = browser.execute_script("return document.querySelectorAll('figure').length")
    assert n_figures >= 4
    assert len(images) == n_figures and all(i["inFigure"] for i in images)
    for img in images:
        assert img["complete"] and img["decoded"], img
        assert img["naturalWidth"] > 0 and img["naturalHeight"] > 0, img
        assert img["shownWidth"] > 100 and img["shownHeight"] > 50, img

    height = int(browser.execute_script("return document.documentElement.scrollHeight"))
    browser.set_window_size(1280, min(max(height, 900), 16000))
    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    data = shot.read_bytes()
    width, shot_height = _png_size(data)
    assert width >= 800 and shot_height >= 900
    assert len(data) > 50_000, "a page with figures is not a near-empty PNG"
    from PIL import Image

    with Image.open(shot) as im:
        pixels = np.asarray(im.convert("L"), dtype=float)
    assert pixels.std() > 5.0, "the screenshot is not blank"
    assert (pixels < 128).mean() > 0.002, "dark pixels: text and plot lines were drawn"


def test_the_checks_catch_a_broken_page(browser: Any, tmp_path: Path) -> None:
    """Control: a script error and an image that cannot be decoded are both detected."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>broken</title></head><body>"
        "<figure><img alt='bad' src='data:image/png;base64,AAAA'></figure>"
        "<script>throw new Error('deliberate failure');</script></body></html>",
        encoding="utf-8",
    )
    errors, images = _open(browser, page)
    assert any("deliberate failure" in e.get("message", "") for e in errors), errors
    assert len(images) == 1 and images[0]["naturalWidth"] == 0 and not images[0]["decoded"]
