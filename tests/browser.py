"""Debian's chromium, headless, driven by Playwright: the person's pages as a browser shows them.

Never a browser Playwright downloads: ``./dev test`` installs Debian's ``chromium`` when it is
missing, and every launch names that executable. The flags keep it off the network (this machine
has none but loopback for tests) and out of any profile of the user's.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from playwright.async_api import Browser as AsyncBrowser
from playwright.async_api import async_playwright
from playwright.sync_api import Browser, Page, ViewportSize, sync_playwright

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless=new",
    "--no-sandbox",  # root in CI's container: chromium's sandbox needs a user namespace it may not get
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
]
PHONE: ViewportSize = {"width": 390, "height": 844}
"""A phone's viewport: every page must be usable at this width."""
SCREENSHOTS_ENV = "LONGTOOLS_SCREENSHOTS"
"""Where the browser tests also save their screenshots (``docs/images`` to refresh the docs')."""


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


@asynccontextmanager
async def async_chromium() -> AsyncIterator[AsyncBrowser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser
        finally:
            await browser.close()


def screenshot_dirs(tmp_path: Path) -> list[Path]:
    """Where a test saves its screenshots: its own tmp dir, and ``$LONGTOOLS_SCREENSHOTS`` if set."""
    extra = os.environ.get(SCREENSHOTS_ENV)
    dirs = [tmp_path]
    if extra:
        dirs.append(Path(extra))
        dirs[-1].mkdir(parents=True, exist_ok=True)
    return dirs


def save_screenshot(page: Page, tmp_path: Path, name: str) -> None:
    """Save the whole ``page`` as ``name`` in each of ``screenshot_dirs``."""
    for folder in screenshot_dirs(tmp_path):
        page.screenshot(path=str(folder / name), full_page=True)
