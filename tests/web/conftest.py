# SPDX-License-Identifier: MIT
"""The dashboard's tests: a real server, a real driver, and Debian's Chromium.

Playwright cannot download its own browser here, and need not: it drives
the system's `/usr/bin/chromium` (`make browser` or `.ci/run` install it
from the system packages). Without it the tests skip, saying how to get
it, on a laptop; in CI (`CI` set, or `RAINIER_QUEUE_REQUIRE_SERVICES=1`) a
missing browser fails them, so a dashboard nobody ran never shows as passing.

Every test that opens the browser carries the `browser` mark; they run in the suite's xdist
processes beside the rest, a file to a process, each file starting one
browser.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conftest import REQUIRE_SERVICES

CHROMIUM = Path(os.environ.get("RAINIER_QUEUE_CHROMIUM", "/usr/bin/chromium"))
REQUIRED = REQUIRE_SERVICES or bool(os.environ.get("CI"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


def _missing(why: str) -> None:
    if REQUIRED:
        pytest.fail(f"the dashboard's tests need Chromium, and {why} (CI requires it)")
    pytest.skip(
        f"{why}: install it with `make browser` (apt-get install chromium) to run the "
        "dashboard's browser tests"
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium, the system's, driven by Playwright; one per test file."""
    if not CHROMIUM.exists():
        _missing(f"there is no {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (make install)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield launched
        finally:
            launched.close()
