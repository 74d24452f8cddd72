# SPDX-License-Identifier: MIT
"""`workers`, `jobs --running` and `job ID`, run as a user runs them, on a SQLite file."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

from .harness import PATIENCE, Cli


def dispatched(cli: Cli, name: str, payload: dict[str, Any] | None = None) -> str:
    args = ["dispatch", name] + (["--payload", json.dumps(payload)] if payload else [])
    result = cli(*args)
    assert result.code == 0, result.output
    return result.stdout.strip()


def test_job_says_queued_failed_succeeded_or_unknown_with_an_exit_code_for_each(
    cli: Cli,
) -> None:
    waiting = dispatched(cli, "note", {"text": "hello"})
    queued = cli("job", waiting)
    as_json = cli("job", waiting, "--json")
    unknown = cli("job", "01234567-89ab-7def-8123-456789abcdef")
    cli("clear")
    boom = dispatched(cli, "boom", {"reason": "the card was declined"})
    note = dispatched(cli, "note", {"text": "kept"})
    worked = cli("work", "--once", "--keep-succeeded", "1h")
    failed = cli("job", boom)
    succeeded = cli("job", note, "--json")

    assert (queued.code, as_json.code, unknown.code) == (0, 0, 4), queued.output + unknown.output
    assert "status:    queued" in queued.stdout
    assert "name:      note" in queued.stdout
    assert as_json.json()["status"] == "queued"
    assert as_json.json()["payload"]["text"] == "hello"
    assert "status:    unknown" in unknown.stdout
    assert "no such job" in unknown.stdout
    assert worked.code == 1, worked.output  # a job failed
    assert failed.code == 1, failed.output
    assert "RuntimeError: the card was declined" in failed.stdout
    assert f"`rainier-queue failed {boom}` shows it whole" in failed.stdout
    assert succeeded.code == 0, succeeded.output
    assert succeeded.json()["status"] == "succeeded"


def test_jobs_needs_to_be_told_which(cli: Cli) -> None:
    result = cli("jobs")
    assert result.code == 2
    assert "--running" in result.stderr


def test_a_working_worker_is_listed_with_what_it_runs_and_gone_from_the_list_once_stopped(
    cli: Cli, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    job_id = dispatched(cli, "slow", {"path": str(marker), "seconds": 600, "naps": True})
    worker = cli.start("work", "--heartbeat", "200ms", "--grace", "0s")
    try:
        deadline = time.monotonic() + PATIENCE
        listed: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = cli("workers", "--json")
            assert result.code == 0, result.output
            listed = result.json()
            if listed and listed[0]["running"]:
                break
            time.sleep(0.1)
        running = cli("jobs", "--running", "--json")
        table = cli("workers")
        state = cli("job", job_id, "--json")
    finally:
        worker.send_signal(signal.SIGINT)
        worker.communicate(timeout=PATIENCE)
    after = cli("workers", "--json")

    [beat] = listed
    assert beat["state"] == "up"
    assert beat["queues"] == ["default"]
    assert [job["id"] for job in beat["running"]] == [job_id]
    assert [(j["id"], j["worker"]) for j in running.json()] == [(job_id, beat["id"])]
    assert beat["id"] in table.stdout
    assert state.json()["status"] == "running"
    assert state.json()["worker"] == beat["id"]
    assert after.json() == []
