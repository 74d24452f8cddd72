# SPDX-License-Identifier: MIT
"""Mistakes get one clear line and an exit code, never a traceback or a password; `doctor`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rainier_queue.connections import open_queue
from rainier_queue.envelope import QueuedJob

from ..redis_servers import standalone
from ..services import require_port
from .harness import APP, Cli, clean_env, no_traceback, run

SECRET = "s3cr3t-pa55"


def test_an_unknown_option_is_a_usage_error_with_no_traceback(cli: Cli) -> None:
    result = cli("work", "--concurency", "4")

    assert result.code == 2, result.output
    assert "No such option" in result.stderr
    assert "--concurrency" in result.stderr, "click suggests the option meant"
    assert no_traceback(result)


def test_an_unknown_connection_is_a_usage_error_naming_the_declared_ones(db_url: str) -> None:
    result = run("--app", APP, "--url", db_url, "--connection", "bulk", "size")

    assert result.code == 2, result.output
    assert "no queue connection is named `bulk`" in result.stderr
    assert "`default`" in result.stderr
    assert no_traceback(result)


def test_no_url_and_no_config_stops_with_a_message_saying_how_to_give_one(
    tmp_path: Path,
) -> None:
    result = run("size", cwd=tmp_path)

    assert result.code == 2, result.output
    assert "no queue connection is configured" in result.stderr
    assert "--url" in result.stderr
    assert "RAINIER_QUEUE_URL" in result.stderr
    assert "--config" in result.stderr
    assert no_traceback(result)


def test_an_app_that_cannot_be_imported_is_a_usage_error_with_no_traceback(db_url: str) -> None:
    missing = run("--app", "no_such_module:registry", "--url", db_url, "size")
    wrong_attr = run("--app", "tests.cli.sample_jobs:nope", "--url", db_url, "size")
    not_a_spec = run("--app", "tests.cli.sample_jobs", "--url", db_url, "size")

    assert missing.code == 2, missing.output
    assert "cannot import `no_such_module`" in missing.stderr
    assert wrong_attr.code == 2, wrong_attr.output
    assert "has no attribute `nope`" in wrong_attr.stderr
    assert "`registry`" in wrong_attr.stderr, "it lists the registries it found"
    assert not_a_spec.code == 2, not_a_spec.output
    assert "module:attribute" in not_a_spec.stderr
    for result in (missing, wrong_attr, not_a_spec):
        assert no_traceback(result)


def test_verbose_shows_the_traceback_behind_an_error(db_url: str) -> None:
    result = run("-v", "--app", APP, "--url", db_url, "--connection", "bulk", "size")

    assert result.code == 2, result.output
    assert "Traceback" in result.stderr
    assert "no queue connection is named `bulk`" in result.stderr


def test_giving_both_a_url_and_a_config_is_refused(db_url: str, tmp_path: Path) -> None:
    result = run("--url", db_url, "--config", str(tmp_path / "x.toml"), "size")

    assert result.code == 2, result.output
    assert "give one of them" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("size",),
        ("doctor",),
        ("-v", "work", "--once"),
        ("-vv", "dispatch", "note", "--payload", '{"text": "x"}'),
        ("failed",),
    ],
    ids=lambda args: " ".join(args),
)
def test_a_password_in_the_url_never_appears_in_any_output(args: tuple[str, ...]) -> None:
    url = f"memory://worker:{SECRET}@localhost/"
    working = run("--app", APP, "--url", url, *args)
    # memory:// takes no `token`: refused, and the secret still never shown.
    refused = run("--app", APP, "--url", f"{url}?token={SECRET}", *args)
    unreachable_url = f"postgresql://app:{SECRET}@db.internal/app?pool_timeout=0.5s"
    unreachable = run("--app", APP, "--url", unreachable_url, *args)

    assert refused.code == 2, refused.output
    for result in (working, unreachable, refused):
        assert SECRET not in result.output
        assert no_traceback(result) or "-v" in args[0]
    assert working.code in (0, 4), working.output
    # 3: the broker did not answer, or 4 from doctor, which reports it as a problem
    # (2 where the postgres extra is not installed).
    assert unreachable.code in ((2, 4) if "doctor" in args else (2, 3)), unreachable.output


def test_a_password_in_the_environment_never_appears_either(tmp_path: Path) -> None:
    env = clean_env(RAINIER_QUEUE_URL=f"memory://app:{SECRET}@localhost", RAINIER_QUEUE_APP=APP)

    conflict = run("--config", str(tmp_path / "x.toml"), "size", env=env)
    both = run("size", env={**env, "RAINIER_QUEUE_CONFIG": str(tmp_path / "x.toml")})

    assert conflict.code == 2, "a --config flag outranks the URL variable; the file is missing"
    assert both.code == 2, both.output
    assert "give one of them" in both.stderr
    for result in (conflict, both):
        assert SECRET not in result.output


def test_doctor_reports_a_worker_timeout_that_outlives_the_lease(db_url: str) -> None:
    result = Cli(db_url + "?lease=30s")("doctor")

    assert result.code == 4, result.output
    assert "problem" in result.stdout
    assert "timeout` (60s) is not shorter than" in result.stdout
    assert "30s lease" in result.stdout


def test_doctor_is_content_with_a_sound_setup(cli: Cli) -> None:
    cli("migrate")

    result = cli("doctor")

    assert result.code == 0, result.output
    assert "reachable; schema version" in result.stdout
    assert "no problems found" in result.stdout


def test_doctor_names_failed_jobs_no_job_class_knows_and_what_to_do(cli: Cli, db_url: str) -> None:
    async def pushed_by_another_service() -> None:
        queue = open_queue(db_url)
        try:
            names = ("sned-welcome", "sned-welcome", "retired-report", "boom")
            await queue.push_many([QueuedJob.create(name, {}, max_attempts=1) for name in names])
        finally:
            await queue.aclose()

    cli("migrate")
    asyncio.run(pushed_by_another_service())
    worked = cli("work", "--stop-when-empty")
    assert "failed 4" in worked.stdout, worked.output

    result = cli("doctor")

    assert "2 failed job(s) named `sned-welcome` (on `default`" in result.stdout, result.output
    assert "1 failed job(s) named `retired-report`" in result.stdout
    assert "register the class, then `rainier-queue retry ID`" in result.stdout
    assert "named `boom`" not in result.stdout, "a known job that failed is not unknown"


def test_doctor_reports_unique_jobs_without_a_lock_store(db_url: str) -> None:
    result = Cli(db_url, app="tests.cli.sample_jobs:unique_registry")("doctor")

    assert result.code == 4, result.output
    assert "`once-per-order` ask(s) to be unique, but there is no lock store" in result.stdout


def test_doctor_reports_unique_jobs_whose_lock_store_other_processes_do_not_share(
    tmp_path: Path,
) -> None:
    config = tmp_path / "rainier-queue.toml"
    config.write_text(
        'app = "tests.cli.sample_jobs:unique_registry"\n'
        'locks = "memory://"\n'
        f'connections.main = "sqlite:///{tmp_path / "jobs.db"}"\n',
        encoding="utf-8",
    )

    result = run("--config", str(config), "doctor")

    assert result.code == 4, result.output
    assert "is not shared between processes" in result.stdout


def test_doctor_warns_about_a_redis_that_keeps_nothing_on_disk() -> None:
    require_port("redis", 6379)
    servers, port = standalone()  # a private server, started with --save "" --appendonly no
    try:
        result = run("--app", APP, "--url", f"redis://127.0.0.1:{port}/0", "doctor")
    finally:
        servers.stop()

    assert result.code == 0, result.output
    assert "keeps nothing on disk" in result.stdout


def test_doctor_calls_a_schema_that_will_not_be_migrated_a_problem_and_says_to_run_migrate(
    db_url: str,
) -> None:
    cli = Cli(db_url + "?migrate=false")

    before = cli("doctor")
    refused = cli("size")
    cli("migrate")
    after = cli("doctor")

    assert before.code == 4, before.output
    assert "run `rainier-queue provision`" in before.stdout
    assert refused.code == 2, refused.output
    assert "rainier-queue provision" in refused.stderr
    assert "did not answer" not in refused.output
    assert no_traceback(refused)
    assert after.code == 0, after.output
    assert "no problems found" in after.stdout


def test_a_misspelt_job_name_in_dispatch_gets_a_did_you_mean(cli: Cli) -> None:
    result = cli("dispatch", "nots", "--payload", '{"text": "x"}')

    assert result.code == 2, result.output
    assert "did you mean `note`?" in result.stderr
    assert "Deploy a worker" not in result.stderr, "the worker's advice does not fit a dispatch"
    assert no_traceback(result)
    assert cli.sizes("default") == {"default": 0}


def test_an_app_given_as_a_file_path_is_imported_from_that_file(db_url: str) -> None:
    cli = Cli(db_url, app="./tests/cli/sample_jobs.py:registry")

    result = cli("dispatch", "note", "--payload", '{"text": "x"}')

    assert result.code == 0, result.output
    assert cli.sizes("default") == {"default": 1}


def test_an_app_file_that_does_not_exist_is_named_in_one_line(db_url: str) -> None:
    result = Cli(db_url, app="./no_such_jobs.py:registry")("size")

    assert result.code == 2, result.output
    assert "no_such_jobs.py" in result.stderr
    assert "does not exist" in result.stderr
    assert no_traceback(result)


def test_an_app_that_names_a_job_class_says_what_app_must_name(db_url: str) -> None:
    result = Cli(db_url, app="tests.cli.sample_jobs:Note")("size")

    assert result.code == 2, result.output
    assert "names the class `Note`" in result.stderr
    assert "must name the JobRegistry" in result.stderr
    assert "`registry`" in result.stderr, "the registries the module has are listed"
    assert no_traceback(result)


def test_a_config_file_takes_values_from_the_environment_and_names_a_missing_one(
    tmp_path: Path,
) -> None:
    config = tmp_path / "rainier-queue.toml"
    config.write_text(
        f'app = "{APP}"\n[connections]\nmain = "sqlite:///${{RQ_TEST_FOLDER}}/jobs.db"\n',
        encoding="utf-8",
    )

    with_it = run(
        "--config",
        str(config),
        "dispatch",
        "note",
        "--payload",
        '{"text": "x"}',
        env=clean_env(RQ_TEST_FOLDER=str(tmp_path)),
    )
    without = run("--config", str(config), "size")

    assert with_it.code == 0, with_it.output
    assert (tmp_path / "jobs.db").exists()
    assert without.code == 2, without.output
    assert "`RQ_TEST_FOLDER`" in without.stderr
    assert "not set" in without.stderr
    assert no_traceback(without)


def test_an_unknown_scheme_lists_only_the_drivers_this_version_has() -> None:
    result = run("--app", APP, "--url", "amqx://localhost", "size")

    assert result.code == 2, result.output
    assert "`sqlite`" in result.stderr
    assert "`sqs`" in result.stderr, "SQS is built now, so it is offered"
    assert no_traceback(result)


def schedule_config(tmp_path: Path, top: str = "", tables: str = "") -> Path:
    config = tmp_path / "rainier-queue.toml"
    config.write_text(
        f'app = "{APP}"\n{top}[connections]\nmain = "sqlite:///{tmp_path / "jobs.db"}"\n{tables}',
        encoding="utf-8",
    )
    return config


def test_doctor_lists_every_problem_of_a_broken_schedule_table_and_exits_4(
    tmp_path: Path,
) -> None:
    tables = (
        "[schedules.morning]\n"
        'job = "noet"\ncron = "61 7 * * *"\nzone = "Europe/Pariss"\noverlpa = "skip"\n'
    )
    result = run("--config", str(schedule_config(tmp_path, tables=tables)), "doctor")
    assert result.code == 4, result.output
    assert "no problems found" not in result.stdout
    for said in (
        "unknown key `overlpa`",
        "job `noet` is not registered",
        "unknown time zone `Europe/Pariss`",
        "the minute field `61` is not valid",
    ):
        assert said in result.stdout, result.stdout


def test_doctor_checks_the_schedule_in_code_named_in_the_config(tmp_path: Path) -> None:
    top = 'schedule = "tests.cli.sample_schedule:broken"\n'
    result = run("--config", str(schedule_config(tmp_path, top=top)), "doctor")
    assert result.code == 4, result.output
    assert "schedule `three-fields`: `* * *`: a cron expression has 5 fields" in result.stdout
    assert "schedule `late`: `25:00` is not a time of day" in result.stdout


def test_doctor_is_content_with_sound_schedules_and_says_where_their_claims_live(
    tmp_path: Path,
) -> None:
    top = 'schedule = "tests.cli.sample_schedule:schedule"\n'
    result = run("--config", str(schedule_config(tmp_path, top=top)), "doctor")
    assert result.code == 0, result.output
    assert "2 schedule(s) can run: `fast`, `new-year`" in result.stdout
    assert "their claims are kept in the connection's own store" in result.stdout
