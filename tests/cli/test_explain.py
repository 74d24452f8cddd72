# SPDX-License-Identifier: MIT
"""`explain ID` and doctor's view of the whole connection, run as a user runs them."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from rainier_queue import QueueConfig
from rainier_queue._clock import utcnow
from rainier_queue.jobstate import RecordStore, RunningJob, WorkerBeat, worker_key

from .harness import PATIENCE, Cli, no_traceback
from .sample_jobs import registry


def dispatched(cli: Cli, *args: str, payload: dict[str, Any] | None = None) -> str:
    more = ["--payload", json.dumps(payload)] if payload else []
    result = cli("dispatch", *args, *more)
    assert result.code == 0, result.output
    return result.stdout.strip()


def test_explain_says_why_a_waiting_job_waits_and_what_would_change_it(cli: Cli) -> None:
    later = dispatched(cli, "note", "--delay", "1h", payload={"text": "later"})
    not_due = cli("explain", later)
    now = dispatched(cli, "note", payload={"text": "now"})
    no_worker = cli("explain", now)
    cli("pause", "default")
    paused = cli("explain", now, "--json")
    cli("resume", "default")
    unknown = cli("explain", "01234567-89ab-7def-8123-456789abcdef")
    doctor = cli("doctor")

    assert not_due.code == 0, not_due.output
    assert "not due until" in not_due.stdout
    assert "dispatched with a delay" in not_due.stdout
    assert no_worker.code == 0, no_worker.output
    assert "no live worker serves queue `default`" in no_worker.stdout
    assert "no worker has a heartbeat on this connection" in no_worker.stdout
    assert "`rainier-queue work --queue default`" in no_worker.stdout
    assert paused.json()["code"] == "paused"
    assert [c["code"] for c in paused.json()["causes"]] == ["paused", "no_worker"]
    assert "`rainier-queue resume default`" in paused.json()["causes"][0]["fix"]
    assert unknown.code == 4, unknown.output
    assert "no such job" in unknown.stdout
    assert no_traceback(unknown)
    # No worker ever started: said, not warned (a deployment that has not started one yet).
    assert doctor.code == 0, doctor.output
    assert (
        "no worker has a heartbeat on this connection; jobs wait on `default` (2) "
        "until one is started"
    ) in doctor.stdout


def test_explain_a_failed_job_gives_its_error_and_the_retry_command(cli: Cli) -> None:
    boom = dispatched(cli, "boom", payload={"reason": "the card was declined"})
    cli("work", "--once")

    failed = cli("explain", boom)

    assert failed.code == 1, failed.output
    assert "it failed after 1 attempt(s): RuntimeError: the card was declined" in failed.stdout
    assert f"`rainier-queue retry {boom}`" in failed.stdout


def test_explain_names_the_worker_that_runs_a_job_and_doctor_sees_the_rest(
    cli: Cli, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    slow = dispatched(
        cli,
        "slow",
        "--queue",
        "emails",
        payload={"path": str(marker), "seconds": 600, "naps": True},
    )
    worker = cli.start("work", "--queue", "emails", "--heartbeat", "200ms", "--grace", "0s")
    try:
        deadline = time.monotonic() + PATIENCE
        answer: dict[str, Any] = {}
        while time.monotonic() < deadline:
            result = cli("explain", slow, "--json")
            assert result.code == 0, result.output
            answer = result.json()
            if answer["code"] == "running":
                break
            time.sleep(0.1)
        elsewhere = dispatched(cli, "note", payload={"text": "x"})
        other = cli("explain", elsewhere)
        doctor = cli("doctor")
        said = cli("explain", slow)
    finally:
        worker.send_signal(signal.SIGINT)
        worker.communicate(timeout=PATIENCE)

    assert answer["code"] == "running", answer
    assert "the worker is alive" in said.stdout
    assert "leased by worker " in said.stdout
    workers = cli("workers", "--json")  # the worker stopped cleanly: its record is gone
    assert workers.json() == []
    assert "no live worker serves queue `default`; live workers serve `emails`" in other.stdout
    assert "1 live worker(s), serving `emails`" in doctor.stdout
    assert (
        "queue `default` has 1 job(s) waiting and no live worker serves it; "
        "start one: `rainier-queue work --queue default`"
    ) in doctor.stdout


def test_a_driver_that_cannot_look_up_says_so_and_doctor_says_what_it_cannot_tell() -> None:
    inline = Cli("sync://")

    answer = inline("explain", "01234567-89ab-7def-8123-456789abcdef")
    doctor = inline("doctor")

    assert answer.code == 4, answer.output
    assert "the sync driver cannot look a job up by id" in answer.stdout
    assert "use instead:" in answer.stdout
    assert no_traceback(answer)
    assert "keeps no worker heartbeats" in doctor.stdout


def test_a_job_a_gone_worker_holds_is_explained_and_listed_by_doctor(cli: Cli) -> None:
    job_id = dispatched(cli, "note", payload={"text": "held"})
    asyncio.run(_die_holding(cli.url, job_id))

    answer = cli("explain", job_id)
    doctor = cli("doctor")

    assert answer.code == 0, answer.output
    assert "leased by worker dead:9:z on host dead" in answer.stdout
    assert "that worker is gone" in answer.stdout
    assert "the job comes back when its lease ends at" in answer.stdout
    assert f"job {job_id} (`note` on `default`) is held by worker dead:9:z on host dead" in (
        doctor.stdout
    )
    assert "it comes back when its lease ends at" in doctor.stdout


async def _die_holding(url: str, job_id: str) -> None:
    """What a worker that died leaves: the job reserved, and its last heartbeat growing old."""
    manager = QueueConfig.from_url(url).build(registry)
    queue = manager.connection()
    assert isinstance(queue, RecordStore)
    [reservation] = await queue.reserve("default")
    then = utcnow() - timedelta(minutes=3)
    beat = WorkerBeat(
        worker_id="dead:9:z",
        host="dead",
        pid=9,
        queues=("default",),
        concurrency=1,
        started_at=then,
        last_beat=then,
        running=(
            RunningJob(job_id=job_id, name="note", queue="default", attempt=1, started_at=then),
        ),
    )
    assert reservation.job.id == job_id
    await queue.put_record(worker_key(beat.worker_id), beat.to_json(), timedelta(minutes=5))
    await manager.aclose()
