# SPDX-License-Identifier: MIT
"""`${NAME}` in a config file: each connection needs only its own variables, and only when used."""

from __future__ import annotations

from pathlib import Path

from .harness import APP, clean_env, no_traceback, run

SECRET = "pa55-w0rd-9"


def two_connections(folder: Path, *, default: str) -> Path:
    config = folder / "rainier-queue.toml"
    config.write_text(
        f'app = "{APP}"\ndefault = "{default}"\n'
        '[connections.main]\nurl = "sqlite:///jobs.db"\n'
        "[connections.cache]\n"
        'url = "redis://:${RQ_TEST_REDIS_PASSWORD}@127.0.0.1:6379/0"\n',
        encoding="utf-8",
    )
    return config


def test_a_command_on_one_connection_does_not_need_another_connections_variables(
    tmp_path: Path,
) -> None:
    config = two_connections(tmp_path, default="cache")

    result = run("--config", str(config), "--connection", "main", "size")

    assert result.code == 0, result.output
    assert "connection `main`" in result.output


def test_using_the_connection_whose_variable_is_not_set_names_the_variable(
    tmp_path: Path,
) -> None:
    config = two_connections(tmp_path, default="main")

    result = run("--config", str(config), "--connection", "cache", "size")

    assert result.code == 2, result.output
    assert "queue connection `cache`" in result.stderr
    assert "`RQ_TEST_REDIS_PASSWORD`" in result.stderr
    assert "not set" in result.stderr
    assert no_traceback(result)


def test_a_dispatch_to_the_default_connection_needs_only_its_own_variables(
    tmp_path: Path,
) -> None:
    config = two_connections(tmp_path, default="main")

    result = run("--config", str(config), "dispatch", "note", "--payload", '{"text": "x"}')

    assert result.code == 0, result.output
    assert (tmp_path / "jobs.db").exists()


def test_a_shell_fallback_is_used_when_the_variable_is_unset_or_empty(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    config = tmp_path / "rainier-queue.toml"
    config.write_text(
        f'app = "{APP}"\n[connections]\nmain = "sqlite:///${{RQ_TEST_DIR:-data}}/jobs.db"\n',
        encoding="utf-8",
    )

    unset = run("--config", str(config), "dispatch", "note", "--payload", '{"text": "x"}')
    empty = run(
        "--config",
        str(config),
        "dispatch",
        "note",
        "--payload",
        '{"text": "y"}',
        env=clean_env(RQ_TEST_DIR=""),
    )

    assert unset.code == 0, unset.output
    assert empty.code == 0, empty.output
    assert (tmp_path / "data" / "jobs.db").exists()
    assert not (tmp_path / "${RQ_TEST_DIR:-data}").exists()


def test_a_shell_form_the_config_does_not_take_is_refused_by_name_without_its_value(
    tmp_path: Path,
) -> None:
    config = tmp_path / "rainier-queue.toml"
    config.write_text(
        f'app = "{APP}"\n[connections]\n'
        f'main = "redis://:${{RQ_TEST_PW:?{SECRET}}}@127.0.0.1:6379/0"\n',
        encoding="utf-8",
    )

    result = run("--config", str(config), "size", env=clean_env(RQ_TEST_PW=SECRET))

    assert result.code == 2, result.output
    assert "${RQ_TEST_PW:?...}" in result.stderr
    assert "${NAME:-fallback}" in result.stderr
    assert SECRET not in result.output
    assert no_traceback(result)
