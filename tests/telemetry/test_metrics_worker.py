# SPDX-License-Identifier: MIT
"""`rainier-queue work --metrics-port`: a worker process's metrics, scraped over HTTP.

A known workload (six jobs that succeed, one that succeeds on its second
attempt, one that fails both, two due in an hour) is dispatched, a real
worker process works it, and its endpoint must then say exactly that.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from rainier_queue.cli.exit_codes import ExitCode

from ..cli.harness import clean_env, start
from .scraping import PATIENCE, metrics_url, scrape_until
from .workload import assert_workload_counted, dispatch_workload, done

APP = "tests.telemetry.metrics_app:registry"


@pytest.mark.timeout(300)
async def test_a_worker_process_serves_exact_counts_for_a_known_workload(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    await dispatch_workload(url)
    worker = start(
        "--app", APP, "--url", url, "work", "--metrics-port", "0", "--concurrency", "2",
        env=clean_env(),
    )  # fmt: skip
    try:
        samples = scrape_until(metrics_url(worker), done)
        assert_workload_counted(samples)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=PATIENCE)
    assert worker.returncode == ExitCode.JOB_FAILED  # the doomed job, as a drain reports it
