# SPDX-License-Identifier: MIT
"""Connections from config: strict, helpful, and never leaking a password."""

from __future__ import annotations

import importlib.util
from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue import ConfigurationError, QueueConfig, UnknownConnection, UnknownOption
from rainier_queue.drivers import open_queue
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.durations import parse_duration
from rainier_queue.errors import MissingDependency
from rainier_queue.redact import redact_url


def test_a_config_file_declares_named_connections_and_the_default(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        """
[tool.rainier-queue]
default = "main"
queues = ["high", "default"]
locks = "memory://"

[tool.rainier-queue.connections.main]
url = "memory://"
lease = "45s"

[tool.rainier-queue.connections]
spare = "memory://"
""",
        encoding="utf-8",
    )

    config = QueueConfig.load(start=tmp_path)
    assert config is not None
    manager = config.build()

    assert manager.connection_names() == ["main", "spare"]
    assert isinstance(manager.queue, MemoryQueue)
    assert manager.queue.lease.total_seconds() == 45
    assert manager.default_queues() == ["high", "default"]
    assert manager.locks is not None


def test_a_default_that_names_no_connection_is_refused() -> None:
    with pytest.raises(UnknownConnection, match=r"`prod`.*`dev`"):
        QueueConfig.from_mapping({"default": "prod", "connections": {"dev": "memory://"}})


def test_an_unknown_key_gets_a_did_you_mean() -> None:
    with pytest.raises(UnknownOption, match="Did you mean `connections`"):
        QueueConfig.from_mapping({"conections": {"a": "memory://"}})
    with pytest.raises(UnknownOption, match="Did you mean `lease`"):
        open_queue("memory://", {"leese": "5s"})


def test_a_connection_may_not_name_a_queue() -> None:
    with pytest.raises(ConfigurationError, match="does not name a `queue`"):
        QueueConfig.from_mapping({"connections": {"a": {"url": "memory://", "queue": "x"}}})


def test_a_driver_whose_extra_is_missing_says_which_pip_install_fixes_it() -> None:
    # Whichever driver's client library this environment lacks (the dev extra installs some).
    candidates = [
        ("kafka://app:secret@localhost:9092", "aiokafka", "kafka"),
        ("redis://app:secret@localhost:6379", "redis", "redis"),
        ("mysql://app:secret@localhost:3306/x", "aiomysql", "mysql"),
        ("postgresql://app:secret@localhost/x", "psycopg", "postgres"),
    ]
    missing = [(u, e) for u, client, e in candidates if importlib.util.find_spec(client) is None]
    if not missing:
        pytest.skip("every driver's client library is installed here")
    url, extra = missing[0]
    with pytest.raises(
        MissingDependency, match=rf"pip install 'rainier-queue\[{extra}\]'"
    ) as caught:
        open_queue(url)
    assert "secret" not in str(caught.value)


def test_a_scheme_whose_driver_this_version_lacks_says_so_rather_than_naming_an_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No driver is announced and unbuilt today (SQS was the last); the rule is kept for the
    # next one, with a scheme reserved for a module that does not exist.
    from rainier_queue import drivers

    planned = drivers._Entry("rainier_queue.drivers.not_yet", "Later", "later", "later_client")
    monkeypatch.setitem(drivers._SCHEMES, "later", planned)
    with pytest.raises(ConfigurationError, match="planned and not built yet") as caught:
        open_queue("later://app:secret@localhost/queue")

    assert not isinstance(caught.value, MissingDependency)
    assert "pip install" not in str(caught.value)
    assert "secret" not in str(caught.value)
    assert "later" not in drivers.known_schemes(), "a planned scheme is never offered"


def test_credentials_never_appear_in_errors_or_reprs() -> None:
    url = "kafkax://app:hunter2@broker:9092/?token=abc"
    with pytest.raises(ConfigurationError) as caught:
        open_queue(url)
    config = QueueConfig.from_url("memory://user:hunter2@x/?token=abc")

    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in repr(config)
    assert "abc" not in repr(config)
    assert redact_url("postgresql://app:secret@db:5432/app?sslkey=k") == (
        "postgresql://app:***@db:5432/app?sslkey=***"
    )
    assert redact_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"
    assert redact_url("sqlite:///jobs.db") == "sqlite:///jobs.db"


def test_a_connection_error_keeps_its_class_and_names_the_connection() -> None:
    config = QueueConfig.from_mapping({"connections": {"main": {"url": "memory://", "leese": 1}}})

    with pytest.raises(UnknownOption, match=r"queue connection `main`: .*Did you mean `lease`"):
        config.build()


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("250ms", 0.25), ("1h30m", 5400), ("2", 2), ("1.5m", 90)]
)
def test_durations_are_written_with_units(text: str, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


def test_a_duration_without_a_known_unit_says_how_to_write_one() -> None:
    with pytest.raises(ConfigurationError, match="30s"):
        parse_duration("ten seconds", setting="lease")


@pytest.mark.parametrize("text", ["maybe", "flase", "", "2"])
def test_a_true_false_option_with_any_other_value_is_refused_not_read_as_no(text: str) -> None:
    with pytest.raises(ConfigurationError, match="must be true or false"):
        open_queue(f"sqlite:///never-created.db?migrate={text}")


async def test_a_lease_in_a_memory_url_is_honoured() -> None:
    queue = open_queue("memory://?lease=5s")

    assert queue.lease == timedelta(seconds=5)


@pytest.mark.parametrize("url", ["memory://?leese=5s", "sync://?lease=5s"])
def test_an_unknown_option_in_the_url_is_refused_like_one_in_the_table(url: str) -> None:
    with pytest.raises(UnknownOption, match="in the URL's query"):
        open_queue(url)


def test_a_connection_may_say_its_driver_and_must_agree_with_its_url() -> None:
    agreeing = QueueConfig.from_mapping(
        {"connections": {"a": {"url": "sqlite:///jobs.db", "driver": "sqlite"}}}
    )
    assert "driver" not in agreeing.connections["a"].options

    with pytest.raises(ConfigurationError, match="disagrees with the URL"):
        QueueConfig.from_mapping({"connections": {"a": {"url": "memory://", "driver": "redis"}}})
    with pytest.raises(UnknownOption, match="Did you mean `sqlite`"):
        QueueConfig.from_mapping({"connections": {"a": {"url": "memory://", "driver": "sqlit"}}})


def test_a_relative_sqlite_path_in_a_config_file_means_the_file_beside_it(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "rainier-queue.toml").write_text(
        'default = "main"\n'
        'locks = "sqlite:///locks.db"\n'
        "[connections]\n"
        'main = "sqlite:///jobs.db?lease=30s"\n'
        'absolute = "sqlite:////var/tmp/other.db"\n'
        'elsewhere = "memory://"\n'
        "[connections.broker]\n"
        'url = "sqs://127.0.0.1:5000/?region=us-east-1"\n'
        'locks = "sqlite:///batches.db"\n',
        encoding="utf-8",
    )

    config = QueueConfig.load(folder / "rainier-queue.toml")

    assert config is not None
    urls = {name: conn.url for name, conn in config.connections.items()}
    assert urls == {
        "main": f"sqlite:///{folder.resolve()}/jobs.db?lease=30s",
        "absolute": "sqlite:////var/tmp/other.db",
        "elsewhere": "memory://",
        "broker": "sqs://127.0.0.1:5000/?region=us-east-1",
    }
    assert config.connections["broker"].options["locks"] == (
        f"sqlite:///{folder.resolve()}/batches.db"
    ), "a connection's own lock store is anchored as its URL is"
    assert config.locks == f"sqlite:///{folder.resolve()}/locks.db"
    assert QueueConfig.from_url("sqlite:///jobs.db").connections["default"].url == (
        "sqlite:///jobs.db"
    ), "a URL given in code keeps meaning the working directory"


def test_a_connection_may_carry_worker_settings_read_and_checked_with_the_file() -> None:
    config = QueueConfig.from_mapping(
        {
            "connections": {
                "main": {
                    "url": "sqlite:///jobs.db",
                    "worker": {"concurrency": 8, "timeout": "2m", "queues": ["high", "default"]},
                }
            }
        }
    )

    assert config.connections["main"].worker == {
        "concurrency": 8,
        "timeout": timedelta(minutes=2),
        "queues": ("high", "default"),
    }
    assert "worker" not in config.connections["main"].options
    with pytest.raises(UnknownOption, match="Did you mean `concurrency`"):
        QueueConfig.from_mapping(
            {"connections": {"main": {"url": "memory://", "worker": {"concurency": 8}}}}
        )
    with pytest.raises(ConfigurationError, match="whole number"):
        QueueConfig.from_mapping(
            {"connections": {"main": {"url": "memory://", "worker": {"concurrency": "8"}}}}
        )


async def test_a_connection_whose_variable_is_not_set_is_refused_only_when_used(
    tmp_path: Path,
) -> None:
    file = tmp_path / "rainier-queue.toml"
    file.write_text(
        'default = "main"\n[connections]\nmain = "memory://"\n'
        'cache = "redis://:${RQ_PW}@127.0.0.1:6379/0"\n',
        encoding="utf-8",
    )

    config = QueueConfig.load(file, environ={})
    assert config is not None
    manager = config.build()
    try:
        with pytest.raises(ConfigurationError, match=r"connection `cache`.*`RQ_PW`.*not set"):
            config.open("cache")
        with pytest.raises(ConfigurationError, match=r"connection `cache`.*`RQ_PW`"):
            await manager.connection("cache").size("default")
        assert await manager.connection("main").size("default") == 0
    finally:
        await manager.aclose()


def test_a_redacted_url_keeps_its_plain_options_readable_and_hides_secret_ones() -> None:
    url = "redis://:s3cret@cache:6379/0?prefix=newbie&password=hunter2&lease=90s"

    assert redact_url(url) == "redis://:***@cache:6379/0?prefix=newbie&password=***&lease=90s"


def test_a_url_held_in_an_option_is_redacted_in_its_turn() -> None:
    url = "kafka://broker:9092/?locks=redis://:pw@cache:6379/0&group=g&store=u@h"

    shown = redact_url(url)

    assert "pw" not in shown
    assert "locks=redis://:***@cache:6379/0" in shown
    assert "group=g" in shown
    assert "store=***" in shown
