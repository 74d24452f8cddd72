# SPDX-License-Identifier: MIT
"""The commands that look at and repair queues: dispatch, size, failed, retry, forget, ..."""

from __future__ import annotations

import json
from pathlib import Path

from .harness import ROOT, Cli, clean_env, no_traceback, run


def fail_one(cli: Cli) -> str:
    """Dispatch a job that fails, run it, and return its id."""
    cli("dispatch", "boom")
    assert cli("work", "--once").code == 1
    [failed] = cli.failed()
    job_id: str = failed["id"]
    return job_id


def test_a_payload_that_does_not_fit_the_job_is_refused_and_nothing_is_queued(
    cli: Cli,
) -> None:
    refused = cli("dispatch", "note", "--payload", '{"text": 42}')

    assert refused.code == 2, refused.output
    assert "does not fit job `note`" in refused.stderr
    assert "`text`" in refused.stderr
    assert no_traceback(refused)
    assert cli.sizes("default") == {"default": 0}


def test_an_unknown_job_name_or_a_payload_that_is_not_json_is_refused(cli: Cli) -> None:
    unknown = cli("dispatch", "no-such-job")
    not_json = cli("dispatch", "note", "--payload", "{text: 1}")

    assert unknown.code == 2, unknown.output
    assert "no job is registered under the name `no-such-job`" in unknown.stderr
    assert "`note`" in unknown.stderr, "the message lists what is registered"
    assert not_json.code == 2, not_json.output
    assert "--payload is not JSON" in not_json.stderr
    assert no_traceback(unknown)
    assert no_traceback(not_json)


def test_a_payload_nested_too_deeply_is_refused_in_one_line_and_nothing_is_queued(
    cli: Cli,
) -> None:
    deep = "[" * 20_000 + "]" * 20_000

    refused = cli("dispatch", "note", "--payload", deep)

    assert refused.code == 2, refused.output
    assert "--payload is nested more than 256 levels deep" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert no_traceback(refused)
    assert cli.sizes("default") == {"default": 0}


def test_without_an_app_dispatch_warns_and_pushes_a_raw_envelope_a_worker_can_run(
    db_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "notes.txt"
    payload = json.dumps({"text": "raw", "path": str(out)})
    raw = run("--url", db_url, "dispatch", "note", "--payload", payload, "--queue", "q")

    assert raw.code == 0, raw.output
    assert "not checked" in raw.stderr
    worked = Cli(db_url)("work", "--queue", "q", "--once")
    assert worked.code == 0, worked.output
    assert out.read_text() == "raw\n"


def test_size_lists_every_queue_it_is_asked_about(cli: Cli) -> None:
    cli("dispatch", "note", "--payload", '{"text": "a"}', "--queue", "emails", "--count", "2")
    cli("dispatch", "note", "--payload", '{"text": "b"}', "--delay", "1h")

    assert cli.sizes("emails", "default", "empty") == {"emails": 2, "default": 1, "empty": 0}
    table = cli("size", "emails")
    assert table.code == 0, table.output
    assert "emails" in table.stdout
    assert "2" in table.stdout


def test_retry_all_puts_a_failed_job_back_on_its_queue(cli: Cli) -> None:
    job_id = fail_one(cli)

    retried = cli("retry", "--all")

    assert retried.code == 0, retried.output
    assert "retried 1" in retried.stdout
    assert cli.failed() == []
    assert cli.sizes("default") == {"default": 1}
    assert cli("work", "--once").code == 1, "it fails again, with its attempts back"
    assert [f["id"] for f in cli.failed()] == [job_id]


def test_retry_by_id_reports_an_id_it_cannot_find_with_exit_1(cli: Cli) -> None:
    job_id = fail_one(cli)

    retried = cli("retry", job_id, "no-such-id")

    assert retried.code == 1, retried.output
    assert f"retried {job_id}" in retried.stdout
    assert "no failed job has id no-such-id" in retried.stderr
    assert cli.sizes("default") == {"default": 1}


def fail_two(cli: Cli) -> tuple[str, str]:
    """Dispatch two jobs that fail, run them, and return their ids, oldest first."""
    cli("dispatch", "boom")
    cli("dispatch", "boom")
    assert cli("work", "--stop-when-empty").code == 1
    newest, oldest = (f["id"] for f in cli.failed())
    return oldest, newest


def test_retry_and_forget_take_the_short_id_the_failed_table_shows(cli: Cli) -> None:
    first, second = fail_two(cli)
    shown = cli("failed").stdout
    short = "…" + first[-12:]
    assert short in shown

    retried = cli("retry", short)
    forgot = cli("forget", second[:23])  # the start of an id works too, if it is unique

    assert retried.code == 0, retried.output
    assert f"retried {first}" in retried.stdout
    assert forgot.code == 0, forgot.output
    assert f"forgot {second}" in forgot.stdout
    assert cli.failed() == []
    assert cli.sizes("default") == {"default": 1}


def test_a_part_of_an_id_that_fits_several_failed_jobs_is_refused_naming_them(cli: Cli) -> None:
    first, second = fail_two(cli)
    shared = next(n for n in range(len(first), 0, -1) if first[:n] == second[:n])
    assert shared >= 6, "two UUIDv7s made a moment apart share their time prefix"

    retried = cli("retry", first[:shared])

    assert retried.code == 1, retried.output
    assert "part of 2 failed jobs' ids" in retried.stderr
    assert first in retried.stderr
    assert second in retried.stderr
    assert len(cli.failed()) == 2, "nothing was guessed"


def test_forget_deletes_a_failed_job_for_good(cli: Cli) -> None:
    job_id = fail_one(cli)

    forgot = cli("forget", job_id)

    assert forgot.code == 0, forgot.output
    assert cli.failed() == []
    assert cli.sizes("default") == {"default": 0}
    assert cli("forget", job_id).code == 1, "a second forget finds nothing"


def test_flush_refuses_without_yes_and_deletes_every_failed_job_with_it(cli: Cli) -> None:
    fail_one(cli)

    refused = cli("flush")
    assert refused.code == 2, refused.output
    assert "--yes" in refused.stderr
    assert len(cli.failed()) == 1

    flushed = cli("flush", "--yes")
    assert flushed.code == 0, flushed.output
    assert cli.failed() == []


def test_clear_refuses_without_yes_and_empties_the_queue_with_it(cli: Cli) -> None:
    cli("dispatch", "note", "--payload", '{"text": "x"}', "--count", "3")

    refused = cli("clear", "default")
    assert refused.code == 2, refused.output
    assert "(3 now)" in refused.stderr
    assert "--yes" in refused.stderr
    assert cli.sizes("default") == {"default": 3}

    cleared = cli("clear", "default", "--yes")
    assert cleared.code == 0, cleared.output
    assert "cleared 3" in cleared.stdout
    assert cli.sizes("default") == {"default": 0}


def test_migrate_creates_the_schema_of_a_fresh_file_and_then_has_nothing_to_do(
    db_url: str,
) -> None:
    cli = Cli(db_url + "?migrate=false")

    first = cli("migrate")
    again = cli("migrate")

    assert first.code == 0, first.output
    assert "applied" in first.stdout
    assert again.code == 0, again.output
    assert "up to date" in again.stdout


def test_an_app_that_is_a_manager_factory_brings_its_own_connection(db_url: str) -> None:
    env = clean_env(RAINIER_QUEUE_TEST_URL=db_url)
    app = "tests.cli.sample_jobs:manager"

    pushed = run("--app", app, "dispatch", "note", "--payload", '{"text": "x"}', env=env)

    assert pushed.code == 0, pushed.output
    assert Cli(db_url).sizes("default") == {"default": 1}


def test_the_environment_names_the_app_and_the_url_when_no_flag_does(db_url: str) -> None:
    env = clean_env(RAINIER_QUEUE_APP="tests.cli.sample_jobs:registry", RAINIER_QUEUE_URL=db_url)

    pushed = run("dispatch", "note", "--payload", '{"text": "x"}', env=env)

    assert pushed.code == 0, pushed.output
    assert "not checked" not in pushed.stderr, "the app came from RAINIER_QUEUE_APP"
    assert Cli(db_url).sizes("default") == {"default": 1}


def test_a_config_file_declares_the_connections_and_the_app(tmp_path: Path) -> None:
    config = tmp_path / "rainier-queue.toml"
    config.write_text(
        'app = "tests.cli.sample_jobs:registry"\n'
        'default = "main"\n'
        "[connections.main]\n"
        f'url = "sqlite:///{tmp_path / "main.db"}"\n'
        "[connections.bulk]\n"
        f'url = "sqlite:///{tmp_path / "bulk.db"}"\n',
        encoding="utf-8",
    )

    where = ("--config", str(config), "--connection", "bulk")
    pushed = run(*where, "dispatch", "note", "--payload", '{"text": "x"}')
    env = clean_env(RAINIER_QUEUE_CONNECTION="bulk")
    sizes = run("--config", str(config), "size", "--json", "default", env=env)

    assert pushed.code == 0, pushed.output
    assert sizes.json() == {"default": 1}
    assert Cli(f"sqlite:///{tmp_path / 'main.db'}").sizes("default") == {"default": 0}


def test_a_unique_job_is_queued_once_and_its_lock_is_given_back_by_the_worker(
    tmp_path: Path,
) -> None:
    config = tmp_path / "rainier-queue.toml"
    config.write_text(
        'app = "tests.cli.sample_jobs:unique_registry"\n'
        f'locks = "sqlite:///{tmp_path / "locks.db"}"\n'
        f'connections.main = "sqlite:///{tmp_path / "jobs.db"}"\n',
        encoding="utf-8",
    )
    where = ("--config", str(config))
    payload = '{"order_id": 7}'

    burst = run(*where, "dispatch", "once-per-order", "--payload", payload, "--count", "3")
    assert burst.code == 0, burst.output
    assert len(burst.stdout.split()) == 1
    assert "2 dropped as duplicates" in burst.stderr

    assert run(*where, "work", "--once").code == 0
    again = run(*where, "dispatch", "once-per-order", "--payload", payload)
    assert again.code == 0, again.output
    assert len(again.stdout.split()) == 1, "the worker released the lock when the job finished"


def test_a_config_file_in_the_working_folder_is_found_without_any_flag(tmp_path: Path) -> None:
    (tmp_path / "rainier-queue.toml").write_text(
        'app = "tests.cli.sample_jobs:registry"\n'
        f'connections.main = "sqlite:///{tmp_path / "j.db"}"\n',
        encoding="utf-8",
    )
    env = clean_env(PYTHONPATH=str(ROOT))

    pushed = run("dispatch", "note", "--payload", '{"text": "x"}', cwd=tmp_path, env=env)
    sizes = run("size", "--json", "default", cwd=tmp_path, env=env)

    assert pushed.code == 0, pushed.output
    assert sizes.json() == {"default": 1}
