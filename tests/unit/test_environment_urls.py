# SPDX-License-Identifier: MIT
"""A connection's URL from the platform's variable, as `QueueConfig` reads it.

The upstream's boot checklist, as ours: `REDIS_URL` (comma-separated: a
cluster's seeds), `KAFKA_BROKERS` (blanks dropped; nothing left is an
error naming the variable), used only where the table leaves `url` out,
read from the environment handed over and never from the process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rainier_queue import QueueConfig
from rainier_queue.drivers.sqs.settings import SQSSettings
from rainier_queue.errors import ConfigurationError
from rainier_queue.unresolved import UnresolvedQueue


def config(table: dict[str, object], environ: dict[str, str] | None) -> QueueConfig:
    return QueueConfig.from_mapping({"connections": {"hot": table}}, environ=environ)


def test_redis_url_gives_a_redis_connection_its_url() -> None:
    hot = config({"driver": "redis", "prefix": "app:"}, {"REDIS_URL": "redis://cache:6379/2"})

    assert hot.connections["hot"].url == "redis://cache:6379/2"
    assert hot.connections["hot"].options == {"prefix": "app:"}
    assert hot.connections["hot"].unresolved is None


def test_a_comma_separated_redis_url_is_a_clusters_seeds() -> None:
    seeds = "redis://a:7000, redis://b:7001,c:7002"

    hot = config({"driver": "redis"}, {"REDIS_URL": seeds})

    assert hot.connections["hot"].url == "redis-cluster://a:7000,b:7001,c:7002"


def test_tls_seeds_are_refused_when_used_saying_how_to_write_a_tls_cluster() -> None:
    hot = config({"driver": "redis"}, {"REDIS_URL": "rediss://a:7000,rediss://b:7001"})

    problem = hot.connections["hot"].unresolved
    assert problem is not None
    assert "REDIS_URL" in problem
    assert "rediss://host:port/?cluster=true" in problem


def test_kafka_brokers_drop_blanks_and_make_a_kafka_url() -> None:
    hot = config(
        {"driver": "kafka", "locks": "redis://cache/0"}, {"KAFKA_BROKERS": " b1:9092 , ,b2:9092 "}
    )

    assert hot.connections["hot"].url == "kafka://b1:9092,b2:9092"
    assert hot.connections["hot"].options == {"locks": "redis://cache/0"}


def test_kafka_brokers_that_name_no_broker_are_refused_naming_the_variable() -> None:
    hot = config({"driver": "kafka"}, {"KAFKA_BROKERS": " , "})

    problem = hot.connections["hot"].unresolved
    assert problem is not None
    assert "takes its `url` from KAFKA_BROKERS, and it is set but names no broker" in problem
    with pytest.raises(ConfigurationError, match="KAFKA_BROKERS"):
        hot.open("hot")


def test_an_unset_variable_is_refused_when_the_connection_is_used_naming_it() -> None:
    both = QueueConfig.from_mapping(
        {
            "default": "main",
            "connections": {"main": "memory://", "hot": {"driver": "redis"}},
        },
        environ={},
    )

    manager = both.build()
    assert isinstance(manager.connection("hot"), UnresolvedQueue)
    with pytest.raises(ConfigurationError, match="REDIS_URL, which is not set"):
        both.open("hot")
    assert manager.connection("main").name == "memory", "the other connection works"


def test_no_environment_handed_over_says_to_hand_it_over() -> None:
    hot = config({"driver": "redis"}, None)

    problem = hot.connections["hot"].unresolved
    assert problem is not None
    assert "environ=os.environ" in problem


def test_a_url_in_the_table_wins_and_the_variable_is_never_read() -> None:
    hot = config(
        {"driver": "redis", "url": "redis://queues:6379/0"}, {"REDIS_URL": "redis://cache:6379/5"}
    )

    assert hot.connections["hot"].url == "redis://queues:6379/0"


def test_a_driver_with_no_variable_needs_its_url_and_says_which_drivers_have_one() -> None:
    with pytest.raises(ConfigurationError, match="the `sqlite` driver has no environment variable"):
        config({"driver": "sqlite"}, {})
    with pytest.raises(ConfigurationError, match='needs a `url`.*driver = "redis" reads REDIS_URL'):
        config({"prefix": "app:"}, {})


def test_a_file_reads_the_variable_from_the_environment_it_is_handed(tmp_path: Path) -> None:
    file = tmp_path / "rainier-queue.toml"
    file.write_text('[connections.hot]\ndriver = "kafka"\nlocks = "memory://"\n', encoding="utf-8")

    loaded = QueueConfig.load(file, environ={"KAFKA_BROKERS": "k:9092"})

    assert loaded is not None
    assert loaded.connections["hot"].url == "kafka://k:9092"


def test_an_sqs_queue_url_becomes_the_default_queue_of_an_sqs_connection_in_its_region() -> None:
    queue_url = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"

    hot = config({"driver": "sqs", "prefix": "app-"}, {"SQS_QUEUE_URL": queue_url})

    url = hot.connections["hot"].url
    assert url.startswith("sqs:///?")

    settings, _ = SQSSettings.read(url, dict(hot.connections["hot"].options), who="sqs")
    assert settings.region == "eu-west-1"
    assert settings.fifo is True
    assert settings.queue_urls == {"default": queue_url}
    assert settings.endpoint is None, "on AWS, botocore's regional endpoint"


def test_an_sqs_queue_url_on_another_host_makes_that_host_the_endpoint() -> None:
    hot = config({"driver": "sqs"}, {"SQS_QUEUE_URL": "http://127.0.0.1:4566/000000000000/jobs"})

    assert hot.connections["hot"].url.startswith("sqs://127.0.0.1:4566/?")
    assert "tls=false" in hot.connections["hot"].url


def test_a_value_that_is_no_sqs_queue_url_is_refused_when_used_naming_the_form() -> None:
    hot = config({"driver": "sqs"}, {"SQS_QUEUE_URL": "orders"})

    problem = hot.connections["hot"].unresolved
    assert problem is not None
    assert "SQS_QUEUE_URL" in problem
    assert "https://sqs.<region>.amazonaws.com/<account>/<queue>" in problem
