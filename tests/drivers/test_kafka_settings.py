# SPDX-License-Identifier: MIT
"""Kafka settings and names, without a broker: what a URL becomes, and what each thing is called.

A URL names the brokers, the lock store and the options, and a table of
options wins over its query; an option misspelt is refused with the right
spelling, and credentials become SASL settings that never show in a
description or a repr. Topics, cursors and leases are named
from the prefix, group, queue and partition: two queues or two groups that
met in one name would share jobs or a cursor, so these pin that they never
do, and that a queue name Kafka cannot spell is escaped.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue import connections
from rainier_queue.drivers import DriverContext, open_queue
from rainier_queue.drivers.kafka import KafkaQueue
from rainier_queue.drivers.kafka.names import (
    cursor_key,
    failed_topic_name,
    lease_name,
    queue_of_failed_topic,
    topic_name,
)
from rainier_queue.drivers.kafka.settings import read_settings
from rainier_queue.errors import ConfigurationError


def test_the_url_lists_the_brokers_and_the_table_wins_over_the_query() -> None:
    read, locks = read_settings(
        "kafka://a:9093,b/?locks=redis%3A%2F%2Fc%3A6379%2F0&group=g1&lease=30s",
        {"group": "g2", "topic_prefix": "jobs."},
    )

    assert read.brokers == ("a:9093", "b:9092")
    assert locks == "redis://c:6379/0"
    assert (read.group, read.topic_prefix, read.lease) == ("g2", "jobs.", timedelta(seconds=30))


def test_credentials_become_sasl_settings_and_never_show() -> None:
    url = (
        "kafka://app:s3cret@broker:9092/?locks=redis://:pw@cache:6379&sasl_mechanism=scram-sha-512"
    )
    read, _ = read_settings(url, {"tls": "true"})

    args = read.client_arguments()
    assert args["sasl_plain_username"] == "app"
    assert args["sasl_plain_password"] == "s3cret"
    assert (args["security_protocol"], args["sasl_mechanism"]) == ("SASL_SSL", "SCRAM-SHA-512")
    for shown in (read.describe(), repr(read)):
        assert "s3cret" not in shown
        assert "pw" not in shown


def test_a_topic_is_the_prefix_and_the_queue_name() -> None:
    assert topic_name("jobs.", "emails") == "jobs.emails"
    assert topic_name("", "send_invoice-2") == "send_invoice-2", "an ordinary name is itself"
    assert failed_topic_name("jobs.", "emails") == "jobs.emails.failed"


def test_a_queue_name_kafka_cannot_spell_is_escaped_and_never_meets_another() -> None:
    names = ["a.b", "a_b", "a b", "émails ✉", "a.failed", "a"]
    topics = [topic_name("", n) for n in names]
    failed = [failed_topic_name("", n) for n in names]

    assert topic_name("", "a.b") == "a.2eb"
    assert len(set(topics + failed)) == len(names) * 2, "distinct queues, distinct topics"
    assert all(
        set(t) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        for t in topics
    )
    with pytest.raises(ConfigurationError, match="too long"):
        topic_name("", "x" * 245)


def test_a_failed_topic_is_read_back_as_its_queue_and_no_other_topic_is() -> None:
    names = ["a.b", "a_b", "a b", "émails ✉", "a.failed", "a", "x" * 150]

    assert [queue_of_failed_topic("jobs.", failed_topic_name("jobs.", n)) for n in names] == names
    assert queue_of_failed_topic("jobs.", "jobs.a") is None, "a queue's own topic"
    assert queue_of_failed_topic("jobs.", "other.a.failed") is None, "another prefix"
    assert queue_of_failed_topic("jobs.", "jobs..61.failed") is None, "never written so"
    assert queue_of_failed_topic("jobs.", "jobs.a.failed.failed") is None
    assert queue_of_failed_topic("jobs.", "jobs..failed") is None, "no queue name at all"
    assert queue_of_failed_topic("jobs.", "jobs..ff.failed") is None, "not UTF-8"


def test_cursor_and_lease_keys_name_the_group_topic_and_partition() -> None:
    assert cursor_key("checkout", "jobs.default", 3) == "kafka-cursor:checkout:jobs.default:3"
    assert lease_name("checkout", "jobs.default", 3) == "kafka:checkout:jobs.default:3"
    assert cursor_key("checkout", "t", 3) != cursor_key("analytics", "t", 3)


async def test_the_connection_layer_hands_the_driver_its_lock_store(tmp_path: Path) -> None:
    url = f"kafka://127.0.0.1:9092/?locks=sqlite:///{tmp_path / 'locks.db'}"

    queue = connections.open_queue(url)  # builds the queue and its lock store; connects to nothing

    try:
        assert isinstance(queue, KafkaQueue)
        assert queue.locks.cache.name == "sqlite"
    finally:
        await queue.aclose()


def test_a_driver_context_without_a_lock_store_opener_is_refused_with_the_way_out() -> None:
    with pytest.raises(ConfigurationError, match=r"connections\.open_queue"):
        open_queue("kafka://127.0.0.1:9092/?locks=redis://x", {}, DriverContext())
