# SPDX-License-Identifier: MIT
"""What the dashboard's buttons do, clicked in a real browser over SQLite: a failed job
retried runs and leaves the failed page; forget, flush, pause, resume and "run now"."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rainier_queue.scheduling import Schedule

from .jobs import FAILING, QUEUE, Toggle
from .server import Served, served_over

SCREENSHOT = Path(__file__).parents[2] / "docs" / "images" / "dashboard-overview.png"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    schedule = Schedule()
    schedule.job(Toggle(key="nightly")).daily_at("03:00")
    with served_over("sqlite", tmp_path, schedule=schedule) as server:
        yield server


def failed_jobs(served: Served, *keys: str) -> list[str]:
    """Dispatch a `Toggle` per key, each failing, and run them into the failed store."""
    FAILING.update(keys)
    try:
        ids = served.dispatch(*(Toggle(key=key) for key in keys))
        served.work()
    finally:
        FAILING.difference_update(keys)
    assert [served.status(i).status for i in ids] == ["failed"] * len(ids)
    return ids


def test_a_failed_job_retried_by_a_click_runs_and_leaves_the_failed_page(
    served: Served, browser: Any
) -> None:
    [job_id, other] = failed_jobs(served, "retried", "left")
    page = browser.new_page()
    try:
        page.goto(served.base + "/failed")
        row = page.locator(f'#failed-jobs tr[data-job="{job_id}"]')
        assert "fails while the test says so" in row.inner_text()
        row.locator('input[name="id"]').check()
        page.click("#retry-selected")
        assert page.inner_text("#said") == "retried 1 of 1 failed job(s)"
        assert served.status(job_id).status == "queued"

        served.work()

        row.wait_for(state="detached")  # the page's own polling took it away
        assert page.locator(f'#failed-jobs tr[data-job="{other}"]').count() == 1
        page.goto(f"{served.base}/jobs/{job_id}")
        assert page.inner_text("#status") == "succeeded"
    finally:
        page.close()


def test_retry_from_a_jobs_page_and_forget_and_flush_from_the_failed_page(
    served: Served, browser: Any
) -> None:
    [retried, forgotten, flushed] = failed_jobs(served, "one", "two", "three")
    page = browser.new_page()
    try:
        page.goto(f"{served.base}/jobs/{retried}")
        page.click("#retry-job")
        assert "retried 1 of 1" in page.inner_text("#said")
        assert served.status(retried).status == "queued"

        page.goto(served.base + "/failed")
        page.locator(f'tr[data-job="{forgotten}"] input[name="id"]').check()
        page.click("#forget-selected")
        assert "forgot 1 of 1" in page.inner_text("#said")
        assert served.status(forgotten).status == "unknown"

        page.click("#flush")  # without ticking "delete for good": refused
        assert "tick the box" in page.inner_text("#said")
        assert served.status(flushed).status == "failed"
        page.check('input[name="confirm"]')
        page.click("#flush")
        assert page.inner_text("#said") == "flushed 1 failed job(s)"
        assert served.status(flushed).status == "unknown"
        assert page.locator("#no-failed").is_visible()
    finally:
        page.close()


def test_a_queue_paused_and_resumed_by_its_buttons_and_a_schedule_run_now(
    served: Served, browser: Any
) -> None:
    manager = served.manager
    assert manager is not None
    page = browser.new_page()
    try:
        page.goto(served.base + "/")
        row = page.locator(f'#queues tr[data-queue="{QUEUE}"]')
        row.get_by_role("button", name="Pause").click()
        assert "paused queue web" in page.inner_text("#said")
        assert served.call(lambda: manager.paused([QUEUE])) == {QUEUE}
        row.get_by_role("button", name="Resume").click()
        assert served.call(lambda: manager.paused([QUEUE])) == frozenset()

        page.goto(served.base + "/schedules")
        schedule_row = page.locator('#schedules tr[data-schedule="toggle"]')
        assert "03:00:00" in schedule_row.inner_text()
        schedule_row.get_by_role("button", name="Run now").click()
        said = page.inner_text("#said")
        match = re.fullmatch(r"enqueued toggle now as job (\S+)", said)
        assert match is not None, said
        assert served.status(match.group(1)).status == "queued"
    finally:
        page.close()


def next_update(page: Any) -> None:
    """Wait until the page's own polling has replaced its content once more."""
    before = page.locator("#live").get_attribute("data-refreshed")
    page.wait_for_function(
        "(before) => (document.getElementById('live').dataset.refreshed || null) !== before",
        arg=before,
    )


def test_the_overview_draws_the_depth_it_sampled_and_shows_a_running_workers_heartbeat(
    served: Served, browser: Any
) -> None:
    failed_jobs(served, "pictured")
    page = browser.new_page(viewport={"width": 1280, "height": 640})
    try:
        page.goto(served.base + "/")
        for count in (2, 4, 3):  # the depth climbs between updates: 2, 6, 9
            served.dispatch(*(Toggle(key=f"{count}-{n}") for n in range(count)))
            next_update(page)
            next_update(page)
        row = page.locator(f'#queues tr[data-queue="{QUEUE}"]')
        assert row.locator("td.depth").inner_text() == "9"
        assert row.locator("svg.spark polyline").count() == 1
        with served.worker_running() as worker:
            page.goto(served.base + "/workers")
            assert worker.worker_id in page.inner_text("#workers")
            page.goto(served.base + "/")
            row.locator("td.depth", has_text="0").wait_for()  # drained, seen by polling
            next_update(page)
            assert "1 live worker(s)" in page.inner_text("main")
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT), full_page=True)
    finally:
        page.close()
