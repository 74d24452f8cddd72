# SPDX-License-Identifier: MIT
"""`rainier-queue schedule ...` and `work --with-scheduler`, run as a user would."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from .harness import PATIENCE, Cli, clean_env, no_traceback, run, start

SCHEDULE = "tests.cli.sample_schedule:schedule"


def config_file(tmp_path: Path, schedules: str, *, top: str = "") -> Path:
    file = tmp_path / "rainier-queue.toml"
    file.write_text(
        top + 'app = "tests.cli.sample_jobs:registry"\n'
        f'locks = "sqlite:///{tmp_path / "jobs.db"}"\n'
        "[connections]\n"
        f'main = "sqlite:///{tmp_path / "jobs.db"}"\n' + schedules,
        encoding="utf-8",
    )
    return file


def wait_for(check: object, what: str) -> None:
    """Poll `check()` until it is true; fail after PATIENCE seconds (not a timing assertion)."""
    deadline = time.monotonic() + PATIENCE
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def test_schedule_list_shows_each_schedule_with_its_next_three_runs(cli: Cli) -> None:
    result = cli("schedule", "list", "--schedule", SCHEDULE)
    assert result.code == 0, result.output
    for text in ("fast", "every 200ms", "new-year", "0 0 1 1 *", "Pacific/Auckland", "never"):
        assert text in result.stdout
    assert "2 schedule(s)" in result.stdout


def test_schedule_list_as_json_gives_times_in_utc(cli: Cli) -> None:
    result = cli("schedule", "list", "--json", "--schedule", SCHEDULE)
    assert result.code == 0, result.output
    fast, new_year = result.json()
    assert fast["description"] == "a note five times a second"
    assert len(new_year["next"]) == 3
    assert new_year["next"][0].endswith("-12-31T11:00:00.000000Z")  # midnight in Auckland
    assert new_year["last"] is None


def test_schedule_run_enqueues_what_is_due_and_says_so(cli: Cli) -> None:
    result = cli("schedule", "run", "--schedule", SCHEDULE)
    assert result.code == 0, result.output
    assert "enqueued `fast`" in result.stdout
    assert "skipped `new-year`" in result.stdout
    assert cli.sizes("default") == {"default": 1}


def test_schedule_test_enqueues_one_run_now_and_list_shows_it(cli: Cli) -> None:
    result = cli("schedule", "test", "new-year", "--schedule", SCHEDULE)
    assert result.code == 0, result.output
    assert "enqueued `new-year`" in result.stdout
    assert cli.sizes("default") == {"default": 1}
    listed = cli("schedule", "list", "--json", "--schedule", SCHEDULE).json()
    assert listed[1]["last"]["status"] == "enqueued"
    assert listed[1]["last"]["reason"] == "by hand"


def test_schedule_test_of_an_unknown_name_lists_the_known_ones(cli: Cli) -> None:
    result = cli("schedule", "test", "nope", "--schedule", SCHEDULE)
    assert result.code == 2
    assert "no schedule is named `nope`. The schedules are: fast, new-year" in result.stderr


def test_a_broken_schedule_stops_start_up_listing_every_problem(cli: Cli) -> None:
    result = cli("schedule", "run", "--schedule", "tests.cli.sample_schedule:broken")
    assert result.code == 2
    assert no_traceback(result)
    assert "schedule `three-fields`: `* * *`: a cron expression has 5 fields" in result.stderr
    assert "schedule `late`: `25:00` is not a time of day" in result.stderr


def test_config_schedules_are_checked_against_the_registry(tmp_path: Path) -> None:
    config = config_file(
        tmp_path,
        '[schedules.a]\njob = "note"\npayload = { text = 3 }\ncron = "@daily"\n'
        '[schedules.b]\njob = "missing"\nevery = "1m"\n',
    )
    result = run("--config", str(config), "schedule", "run", env=clean_env())
    assert result.code == 2
    assert "schedule `a`" in result.stderr
    assert "payload" in result.stderr
    assert "job `missing` is not registered" in result.stderr


def test_with_no_schedules_the_command_says_how_to_declare_one(cli: Cli) -> None:
    result = cli("schedule", "run")
    assert result.code == 2
    assert "there are no schedules" in result.stderr


def test_schedule_work_keeps_enqueueing_until_ctrl_c_and_then_exits_cleanly(cli: Cli) -> None:
    process = cli.start("schedule", "work", "--schedule", SCHEDULE)
    try:
        wait_for(lambda: cli.sizes("default")["default"] >= 3, "three scheduled runs")
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=PATIENCE)
    assert process.returncode == 0, stderr
    assert "scheduler stopped" in stderr


def test_a_worker_with_the_scheduler_runs_what_it_schedules(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    config = config_file(
        tmp_path,
        f'[schedules.fast-note]\njob = "note"\npayload = {{ text = "tick", path = "{notes}" }}\n'
        'every = "200ms"\n',
    )
    process = start("--config", str(config), "work", "--with-scheduler", env=clean_env())
    try:
        wait_for(
            lambda: notes.exists() and len(notes.read_text().splitlines()) >= 3,
            "three scheduled jobs to run",
        )
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=PATIENCE)
    assert process.returncode == 0, stderr
    listed = run("--config", str(config), "schedule", "list", "--json", env=clean_env())
    assert json.loads(listed.stdout)[0]["last"]["status"] == "enqueued"


def test_schedule_run_exits_1_when_an_enqueue_fails_and_says_it_will_try_again(
    tmp_path: Path,
) -> None:
    # Claims in a SQLite file that works; the queue on a Redis port where nothing listens.
    config = tmp_path / "rainier-queue.toml"
    config.write_text(
        'app = "tests.cli.sample_jobs:registry"\n'
        f'locks = "sqlite:///{tmp_path / "claims.db"}"\n'
        '[connections]\nmain = "redis://127.0.0.1:1/0"\n'
        '[schedules.often]\njob = "note"\npayload = { text = "x" }\nevery = "1s"\n',
        encoding="utf-8",
    )
    result = run("--config", str(config), "schedule", "run", env=clean_env())
    assert result.code == 1, result.output
    assert "`often`" in result.stderr
    assert "tried again next pass" in result.stderr


BROKEN_TABLE = (
    "[schedules.morning]\n"
    'job = "noet"\n'
    'cron = "61 7 * * *"\n'
    'zone = "Europe/Pariss"\n'
    'overlpa = "skip"\n'
)


def test_every_problem_of_a_broken_schedule_table_is_listed_in_one_run(tmp_path: Path) -> None:
    config = config_file(tmp_path, BROKEN_TABLE)
    result = run("--config", str(config), "schedule", "list", env=clean_env())
    assert result.code == 2, result.output
    assert no_traceback(result)
    for said in (
        "unknown key `overlpa`; did you mean `overlap`?",
        "job `noet` is not registered; did you mean `note`?",
        "unknown time zone `Europe/Pariss`; did you mean `Europe/Paris`?",
        "`61 7 * * *`: the minute field `61` is not valid",
    ):
        assert said in result.stderr, result.stderr


def test_an_interval_given_a_time_zone_is_refused_not_silently_read_in_utc(cli: Cli) -> None:
    result = cli("schedule", "list", "--schedule", "tests.cli.sample_schedule:zoned_interval")
    assert result.code == 2, result.output
    assert "an interval (every 10s) has no time zone" in result.stderr
    assert "`Europe/Paris` would be ignored" in result.stderr


def test_an_interval_given_a_zone_in_the_config_is_refused(tmp_path: Path) -> None:
    config = config_file(
        tmp_path,
        '[schedules.z]\njob = "note"\npayload = { text = "z" }\nevery = "10s"\nzone = "UTC"\n',
    )
    result = run("--config", str(config), "schedule", "list", env=clean_env())
    assert result.code == 2, result.output
    assert "schedule `z`" in result.stderr
    assert "has no time zone" in result.stderr


def test_a_misspelt_schedule_name_gets_a_did_you_mean(cli: Cli) -> None:
    result = cli(
        "schedule", "test", "heartbaet", "--schedule", "tests.cli.sample_schedule:heartbeat"
    )
    assert result.code == 2, result.output
    assert "no schedule is named `heartbaet`; did you mean `heartbeat`?" in result.stderr


def code_schedule_config(tmp_path: Path, notes: Path | None = None) -> Path:
    """A config naming the Schedule in code once, with `schedule = ...`."""
    tables = ""
    if notes is not None:
        tables = (
            f'[schedules.fast-note]\njob = "note"\n'
            f'payload = {{ text = "table", path = "{notes}" }}\nevery = "200ms"\n'
        )
    return config_file(tmp_path, tables, top='schedule = "tests.cli.sample_schedule:schedule"\n')


def test_schedule_list_shows_the_schedule_in_code_named_once_in_the_config(
    tmp_path: Path,
) -> None:
    config = code_schedule_config(tmp_path)
    result = run("--config", str(config), "schedule", "list", "--json", env=clean_env())
    assert result.code == 0, result.output
    assert [row["name"] for row in result.json()] == ["fast", "new-year"]


def test_schedule_test_runs_a_schedule_in_code_named_in_the_config(tmp_path: Path) -> None:
    config = code_schedule_config(tmp_path)
    result = run("--config", str(config), "schedule", "test", "new-year", env=clean_env())
    assert result.code == 0, result.output
    assert "enqueued `new-year`" in result.stdout


def test_no_such_schedule_says_where_schedules_come_from(tmp_path: Path) -> None:
    config = config_file(
        tmp_path, '[schedules.a]\njob = "note"\npayload = { text = "a" }\nevery = "1m"\n'
    )
    result = run("--config", str(config), "schedule", "test", "heartbeat", env=clean_env())
    assert result.code == 2, result.output
    assert "no schedule is named `heartbeat`" in result.stderr
    assert 'schedule = "module:attribute"' in result.stderr
    assert "--schedule" in result.stderr


def test_a_worker_with_the_scheduler_runs_the_schedule_in_code_named_in_the_config(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    config = code_schedule_config(tmp_path, notes)
    process = start("--config", str(config), "work", "--with-scheduler", env=clean_env())
    try:
        wait_for(
            lambda: notes.exists() and len(notes.read_text().splitlines()) >= 1,
            "a scheduled job from the table to run",
        )
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=PATIENCE)
    assert process.returncode == 0, stderr
    assert "scheduling 3 schedule(s) in this worker" in stderr
    listed = run("--config", str(config), "schedule", "list", "--json", env=clean_env())
    last = {row["name"]: row["last"] for row in json.loads(listed.stdout)}
    assert last["fast"] is not None
    assert last["fast"]["status"] == "enqueued"
