# SPDX-License-Identifier: MIT
"""`work --processes 2 --metrics-port`: one endpoint, the children's counts summed.

Each child records in prometheus-client's multi-process mode and the
supervisor serves the sum, so the same workload must give the same exact
counts as one process does, whichever child ran which job.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from rainier_queue.cli.exit_codes import ExitCode

from ..cli.harness import clean_env, start
from .scraping import PATIENCE, metrics_url, scrape_until, wait_for_lines
from .workload import assert_workload_counted, dispatch_workload, done

APP = "tests.telemetry.metrics_app:registry"


@pytest.mark.timeout(300)
async def test_two_worker_processes_serve_one_endpoint_with_their_counts_summed(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    await dispatch_workload(url)
    supervisor = start(
        "--app", APP, "--url", url, "work", "--processes", "2", "--metrics-port", "0",
        env=clean_env(),
    )  # fmt: skip
    try:
        samples = scrape_until(metrics_url(supervisor), done)
        assert_workload_counted(samples)
        # Both children are up (their signal handlers are in place) before they are stopped:
        # one may have done every job while the other was still starting.
        wait_for_lines(supervisor, "working default", 2)
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.communicate(timeout=PATIENCE)
    assert supervisor.returncode == ExitCode.JOB_FAILED
