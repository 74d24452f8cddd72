# SPDX-License-Identifier: MIT
"""Every page loads in a real browser over every cheap driver, and a broker shows why it
shows less: the reasons come from the driver's capabilities, in the library's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .jobs import FAILING, QUEUE, Toggle
from .server import served_over

DRIVERS = ["memory", "sqlite", "postgres", "redis", "rabbitmq"]

PAGES = {
    "/": "Queues",
    "/jobs": "Jobs",
    "/failed": "Failed jobs",
    "/workers": "Workers",
    "/schedules": "Schedules",
}


@pytest.mark.parametrize("driver", DRIVERS)
def test_every_page_loads_and_shows_the_queue_a_job_waits_on(
    driver: str, browser: Any, tmp_path: Path
) -> None:
    with served_over(driver, tmp_path) as served:
        served.dispatch(Toggle(key="waiting"))
        page = browser.new_page()
        try:
            for path, heading in PAGES.items():
                response = page.goto(served.base + path)
                assert response is not None, path
                assert response.status == 200, path
                assert page.locator("main h1").inner_text() == heading
            page.goto(served.base + "/")
            row = page.locator(f'#queues tr[data-queue="{QUEUE}"]')
            assert row.locator("td.depth").inner_text() == "1"
        finally:
            page.close()


def test_a_broker_says_why_it_shows_no_workers_cannot_pause_and_cannot_find_a_job(
    browser: Any, tmp_path: Path
) -> None:
    with served_over("rabbitmq", tmp_path) as served:
        [job_id] = served.dispatch(Toggle(key="on-a-broker"))
        page = browser.new_page()
        try:
            page.goto(served.base + "/workers")
            assert "the rabbitmq driver keeps no records beside its jobs" in page.inner_text("main")
            page.goto(served.base + "/")
            assert "cannot pause a queue: the rabbitmq driver" in page.inner_text("main")
            assert page.locator("#queues button").count() == 0  # no pause button to press
            page.goto(f"{served.base}/jobs/{job_id}")
            assert page.inner_text("#status") == "unknown"
            assert "the rabbitmq driver cannot look a job up by id" in page.inner_text("main")
        finally:
            page.close()


def test_mounted_under_a_prefix_its_links_and_actions_stay_under_it(
    browser: Any, tmp_path: Path
) -> None:
    with served_over("sqlite", tmp_path, mount="/ops/queues") as served:
        FAILING.add("mounted")
        try:
            [job_id] = served.dispatch(Toggle(key="mounted"))
            served.work()
        finally:
            FAILING.discard("mounted")
        page = browser.new_page()
        try:
            page.goto(served.base + "/")
            page.get_by_role("link", name="Failed").click()
            assert page.url == served.base + "/failed"
            page.locator(f'tr[data-job="{job_id}"] input[name="id"]').check()
            page.click("#retry-selected")
            assert page.url.startswith(served.base + "/failed?said=")
            assert page.inner_text("#said") == "retried 1 of 1 failed job(s)"
            assert served.status(job_id).status == "queued"
        finally:
            page.close()


def test_a_log_lists_its_failed_jobs_and_says_why_it_cannot_retry_them(
    browser: Any, tmp_path: Path
) -> None:
    with served_over("kafka", tmp_path) as served:
        FAILING.add("in-a-log")
        try:
            [job_id] = served.dispatch(Toggle(key="in-a-log"))
            served.work()
        finally:
            FAILING.discard("in-a-log")
        page = browser.new_page()
        try:
            page.goto(served.base + "/failed")
            row = page.locator(f'#failed-jobs tr[data-job="{job_id}"]')
            assert "toggle in-a-log fails" in row.inner_text()
            assert "lists its failed jobs but cannot retry, forget or flush them" in (
                page.inner_text("main")
            )
            assert page.locator('main input[type="checkbox"], main button[form]').count() == 0
        finally:
            page.close()
