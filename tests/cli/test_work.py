# SPDX-License-Identifier: MIT
"""`rainier-queue work` in a real process: draining, failing, stopping, supervising."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from .harness import PATIENCE, ROOT, Cli, clean_env, command, no_traceback, run


def test_dispatched_jobs_are_counted_by_size_and_drained_by_a_worker_that_exits_0(
    cli: Cli, tmp_path: Path
) -> None:
    out = tmp_path / "notes.txt"
    payload = json.dumps({"text": "hello", "path": str(out)})
    dispatched = cli("dispatch", "note", "--payload", payload, "--count", "5")
    assert dispatched.code == 0, dispatched.output
    assert len(dispatched.stdout.split()) == 5, "one job id per line"
    assert cli.sizes("default") == {"default": 5}

    worked = cli("work", "--stop-when-empty", "--concurrency", "2")

    assert worked.code == 0, worked.output
    assert "succeeded 5, retried 0, failed 0" in worked.stdout
    assert out.read_text().splitlines() == ["hello"] * 5
    assert cli.sizes("default") == {"default": 0}


def test_a_failing_job_makes_the_worker_exit_1_and_shows_up_in_failed(cli: Cli) -> None:
    cli("dispatch", "boom", "--payload", '{"reason": "the card was declined"}')
    cli("dispatch", "note", "--payload", '{"text": "fine"}')

    worked = cli("work", "--once")

    assert worked.code == 1, worked.output
    assert "succeeded 1, retried 0, failed 1" in worked.stdout
    [failed] = cli.failed()
    assert failed["name"] == "boom"
    assert failed["error"].startswith("RuntimeError: the card was declined")
    table = cli("failed")
    assert table.code == 0, table.output
    assert "…" + failed["id"][-12:] in table.stdout, "the id's random last part"
    assert failed["id"] not in table.stdout
    assert "the card was declined" in table.stdout
    wide = cli("failed", "--wide")
    assert failed["id"] in wide.stdout


def test_the_worker_refuses_to_start_when_its_timeout_outlives_the_lease(db_url: str) -> None:
    cli = Cli(db_url + "?lease=30s")
    cli("dispatch", "note", "--payload", '{"text": "never run"}')

    refused = cli("work", "--once", "--timeout", "2m")

    assert refused.code == 2, refused.output
    assert "not shorter than" in refused.stderr
    assert "--timeout" in refused.stderr
    assert no_traceback(refused)
    assert cli.sizes("default") == {"default": 1}, "nothing ran"


def test_a_sigterm_lets_the_running_job_finish_and_the_worker_exits_cleanly(
    cli: Cli, tmp_path: Path
) -> None:
    marker = tmp_path / "marker.txt"
    cli("dispatch", "slow", "--payload", json.dumps({"path": str(marker), "seconds": 1.5}))
    worker = cli.start("work", "--sleep", "0.2")
    try:
        wait_until_started(worker, marker)
        worker.send_signal(signal.SIGTERM)
        stdout, stderr = worker.communicate(timeout=PATIENCE)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()

    assert worker.returncode == 0, stdout + stderr
    assert marker.read_text().splitlines() == ["started", "finished"]
    assert "succeeded 1, retried 0, failed 0" in stdout
    assert cli.sizes("default") == {"default": 0}
    assert cli.failed() == []


def wait_until_started(worker: subprocess.Popen[str], marker: Path) -> None:
    deadline = time.monotonic() + PATIENCE
    while "started" not in (marker.read_text() if marker.exists() else ""):
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.05)


def test_a_second_sigterm_hands_the_running_job_back_and_exits_130(
    cli: Cli, tmp_path: Path
) -> None:
    marker = tmp_path / "marker.txt"
    payload = {"path": str(marker), "seconds": 30, "naps": True}
    cli("dispatch", "slow", "--payload", json.dumps(payload))
    worker = cli.start("-v", "work", "--sleep", "0.2")
    try:
        wait_until_started(worker, marker)
        worker.send_signal(signal.SIGTERM)
        assert worker.stderr is not None
        seen = ""
        while "received SIGTERM" not in seen:  # two signals at once would merge into one
            line = worker.stderr.readline()
            assert line, "the worker ended before it acknowledged the first signal"
            seen += line
        worker.send_signal(signal.SIGTERM)
        stdout, stderr = worker.communicate(timeout=PATIENCE)
        stderr = seen + stderr
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()

    assert worker.returncode == 130, stdout + stderr
    assert "1 interrupted and handed back" in stdout
    assert cli.sizes("default") == {"default": 1}, "the job waits for the next worker"
    assert cli.failed() == []


def test_two_worker_processes_drain_a_backlog(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "notes.txt"
    payload = json.dumps({"text": "x", "path": str(out)})
    cli("dispatch", "note", "--payload", payload, "--count", "60")

    worked = cli("work", "--processes", "2", "--stop-when-empty", "--concurrency", "3")

    assert worked.code == 0, worked.output
    assert worked.stdout.count("succeeded ") == 2, "each process prints its summary"
    assert out.read_text().splitlines() == ["x"] * 60
    assert cli.sizes("default") == {"default": 0}


def test_a_failed_job_under_the_supervisor_makes_it_exit_1_and_is_not_run_again(
    cli: Cli,
) -> None:
    cli("dispatch", "boom", "--payload", '{"reason": "declined"}')

    worked = cli("work", "--processes", "2", "--stop-when-empty")

    assert worked.code == 1, worked.output
    assert len(cli.failed()) == 1
    assert "restarting" not in worked.output


def test_forced_progress_on_a_pipe_is_plain_lines_and_the_summary_is_always_printed(
    cli: Cli,
) -> None:
    cli("dispatch", "note", "--payload", '{"text": "x"}', "--count", "3")

    with_bar = cli("work", "--stop-when-empty", "--progress")

    assert with_bar.code == 0, with_bar.output
    assert "progress: 3/3 done (succeeded 3, retried 0, failed 0)" in with_bar.stderr
    assert "\x1b" not in with_bar.stderr, "no terminal codes in a log"
    assert "succeeded 3" in with_bar.stdout
    cli("dispatch", "note", "--payload", '{"text": "x"}', "--count", "3")
    without = cli("work", "--stop-when-empty")
    assert "3/3" not in without.stderr, "no progress when stderr is not a terminal"
    assert "succeeded 3" in without.stdout


def test_the_worker_serves_the_queues_it_is_given_in_that_order_and_no_other(
    cli: Cli, tmp_path: Path
) -> None:
    out = tmp_path / "notes.txt"
    for queue in ("low", "high", "other"):
        payload = json.dumps({"text": queue, "path": str(out)})
        cli("dispatch", "note", "--payload", payload, "--queue", queue)

    worked = cli("work", "--queue", "high, low", "--once")

    assert worked.code == 0, worked.output
    assert out.read_text().splitlines() == ["high", "low"]
    assert cli.sizes("high", "low", "other") == {"high": 0, "low": 0, "other": 1}


def test_an_empty_queue_list_or_a_bad_duration_is_a_usage_error(cli: Cli) -> None:
    empty = cli("work", "--queue", " , ")
    bad = cli("work", "--sleep", "soon")

    assert empty.code == 2, empty.output
    assert "--queue names no queue" in empty.stderr
    assert bad.code == 2, bad.output
    assert "not a duration" in bad.stderr
    assert no_traceback(empty)
    assert no_traceback(bad)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_worker_runs_on_the_event_loop_it_is_given_and_says_which(cli: Cli, loop: str) -> None:
    cli("dispatch", "note", "--payload", '{"text": "on any loop"}', "--count", "3")

    worked = cli("--event-loop", loop, "work", "--once", "--concurrency", "2")

    assert worked.code == 0, worked.output
    assert f"{loop} loop" in worked.output
    assert "succeeded 3, retried 0, failed 0" in worked.stdout


def test_an_unknown_event_loop_in_the_environment_is_a_usage_error_naming_the_choices(
    cli: Cli,
) -> None:
    refused = run(*cli.args("size"), env=clean_env(RAINIER_QUEUE_EVENT_LOOP="trio"))

    assert refused.code == 2, refused.output
    assert "RAINIER_QUEUE_EVENT_LOOP" in refused.stderr
    assert "auto, asyncio, uvloop" in refused.stderr
    assert no_traceback(refused)


def test_a_drain_waits_for_a_retry_that_falls_due_soon_and_finishes_it(
    cli: Cli, tmp_path: Path
) -> None:
    out = tmp_path / "attempts.txt"
    cli("dispatch", "fails-first", "--payload", json.dumps({"path": str(out), "retry_after": 1}))

    worked = cli("work", "--stop-when-empty", "--sleep", "0.2s")

    assert worked.code == 0, worked.output
    assert "succeeded 1, retried 1, failed 0" in worked.stdout
    assert out.read_text().splitlines() == ["attempt 1", "attempt 2"]
    assert cli.sizes("default") == {"default": 0}


def test_a_drain_that_leaves_a_retry_due_later_than_it_waits_exits_5_and_says_so(
    cli: Cli, tmp_path: Path
) -> None:
    out = tmp_path / "attempts.txt"
    payload = json.dumps({"path": str(out), "retry_after": 3600})
    cli("dispatch", "fails-first", "--payload", payload)

    worked = cli("work", "--stop-when-empty", "--sleep", "0.2s")

    assert worked.code == 5, worked.output
    assert "work is left on the queues" in worked.stderr
    assert "1 delayed" in worked.stderr
    assert no_traceback(worked)
    shown = cli("size", "default")
    assert shown.code == 0, shown.output
    [row] = [line for line in shown.stdout.splitlines() if " default " in line]
    assert row.replace("│", " ").split() == ["default", "0", "1", "0"], shown.stdout
    states = cli("size", "--json", "--states", "default")
    assert states.json() == {
        "default": {"waiting": 0, "delayed": 1, "reserved": 0, "paused": False}
    }


def test_the_failed_table_never_folds_an_id_on_an_80_column_terminal(cli: Cli) -> None:
    cli("dispatch", "boom", "--payload", '{"reason": "a long reason that takes up the width"}')
    cli("work", "--once")
    [failed] = cli.failed()

    shown = on_terminal(cli.args("failed"), columns=80)
    wide = on_terminal(cli.args("failed", "--wide"), columns=80)

    assert "…" + failed["id"][-12:] in shown, "the short id on one line, as retry takes it"
    assert failed["id"] in wide, "the whole id on one line"


def on_terminal(args: list[str], *, columns: int) -> str:
    """What the CLI prints on a terminal `columns` wide (a pseudo-terminal)."""
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in clean_env().items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(
        command(*args), cwd=ROOT, env=env, stdout=secondary, stderr=secondary, close_fds=True
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the other end closed: the process is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(PATIENCE)
    os.close(primary)
    return b"".join(chunks).decode("utf-8", errors="replace")


def test_worker_logs_reach_the_applications_own_handlers_with_job_fields(
    db_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "app.log"
    app = "tests.cli.sample_logging_app:registry"
    env = clean_env(RAINIER_QUEUE_TEST_LOG=str(log))
    dispatched = run("--app", app, "--url", db_url, "dispatch", "boom", "--payload", "{}", env=env)
    assert dispatched.code == 0, dispatched.output

    worked = run("--app", app, "--url", db_url, "work", "--once", env=env)

    assert worked.code == 1, worked.output
    lines = [line for line in log.read_text().splitlines() if "failed for good" in line]
    assert len(lines) == 1, log.read_text()
    assert "'job': 'boom'" in lines[0]
    assert "'queue': 'default'" in lines[0]
    assert "'attempt': 1" in lines[0]


def test_log_format_json_writes_one_object_per_line_with_the_job_fields(cli: Cli) -> None:
    cli("dispatch", "boom", "--payload", "{}")

    worked = run("--log-format", "json", *cli.args("work", "--once"))

    assert worked.code == 1, worked.output
    records = [json.loads(line) for line in worked.stderr.splitlines() if line.startswith("{")]
    [failed] = [r for r in records if "failed for good" in r["message"]]
    assert failed["level"] == "error"
    assert failed["logger"] == "rainier_queue.worker"
    assert (failed["job"], failed["queue"], failed["attempt"]) == ("boom", "default", 1)
    assert failed["job_id"]
    assert "RuntimeError" in failed["traceback"]


def test_a_connections_worker_table_sets_the_worker_and_a_flag_wins_over_it(
    tmp_path: Path,
) -> None:
    config = tmp_path / "rainier-queue.toml"
    config.write_text(
        'app = "tests.cli.sample_jobs:registry"\n'
        f'[connections.main]\nurl = "sqlite:///{tmp_path / "jobs.db"}"\n'
        '[connections.main.worker]\nconcurrency = 3\nqueues = ["high", "default"]\n',
        encoding="utf-8",
    )
    run("--config", str(config), "dispatch", "note", "--payload", '{"text": "x"}')

    from_table = run("--config", str(config), "work", "--stop-when-empty")
    flagged = run("--config", str(config), "work", "--stop-when-empty", "--concurrency", "2")

    assert from_table.code == 0, from_table.output
    assert "working high, default on" in from_table.stderr
    assert "(concurrency 3," in from_table.stderr
    assert "succeeded 1" in from_table.stdout
    assert "(concurrency 2," in flagged.stderr


def test_doctor_checks_a_connections_worker_table_against_its_lease(tmp_path: Path) -> None:
    config = tmp_path / "rainier-queue.toml"
    config.write_text(
        'app = "tests.cli.sample_jobs:registry"\n'
        f'[connections.main]\nurl = "sqlite:///{tmp_path / "jobs.db"}"\nlease = "30s"\n'
        '[connections.main.worker]\ntimeout = "2m"\n',
        encoding="utf-8",
    )

    result = run("--config", str(config), "doctor")

    assert result.code == 4, result.output
    assert "with the connection's worker settings" in result.stdout


def test_under_log_format_json_every_line_a_drain_writes_is_json(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "attempts.txt"
    cli("dispatch", "fails-first", "--payload", json.dumps({"path": str(out), "retry_after": 3600}))

    worked = run("--log-format", "json", "-v", *cli.args("work", "--stop-when-empty", "--progress"))

    assert worked.code == 5, worked.output
    lines = [line for line in worked.output.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # fails on any line that is not JSON
    messages = " | ".join(str(record["message"]) for record in records)
    assert "working default on" in messages
    assert "work is left on the queues" in messages
    [summary] = [json.loads(line) for line in worked.stdout.splitlines()]
    assert (summary["succeeded"], summary["retried"], summary["failed"]) == (0, 1, 0)


def test_a_global_option_given_after_the_command_says_to_put_it_before(cli: Cli) -> None:
    worked = cli("work", "--once", "--log-format", "json")

    assert worked.code == 2, worked.output
    assert "--log-format is an option of rainier-queue itself" in worked.stderr
    assert "rainier-queue --log-format ... work" in worked.stderr


def test_a_graceful_stop_that_hands_back_only_unstarted_jobs_exits_0_and_says_so() -> None:
    # Jobs a worker reserved ahead go back at a stop before they start: nothing was cut
    # short, so a deploy that stops it with one SIGTERM sees a clean exit, not 130.
    from rainier_queue.cli.exit_codes import ExitCode
    from rainier_queue.cli.progress import summary
    from rainier_queue.cli.work import _code
    from rainier_queue.worker import WorkerStats

    held_back = WorkerStats(processed=3, returned_unstarted=2)
    cut_short = WorkerStats(processed=3, interrupted=1, returned_unstarted=2)

    assert _code(held_back) == ExitCode.OK
    assert _code(cut_short) == ExitCode.INTERRUPTED
    assert "2 handed back before they started" in summary(held_back, 1.0)
    assert "interrupted" not in summary(held_back, 1.0)
