# SPDX-License-Identifier: MIT
"""RabbitMQ settings: the URL and its options read before anything connects.

No server is needed: these are what `open_queue` makes of an `amqp://` or
`amqps://` URL, the refusals that say what to write instead, and the
password kept out of every description. (The machine's RabbitMQ has no TLS
listener, so this is where `amqps://` is held to its options.)
"""

from __future__ import annotations

import ssl
from datetime import timedelta

import pytest

from rainier_queue.connections import open_queue
from rainier_queue.drivers.rabbitmq import RabbitMQQueue
from rainier_queue.drivers.rabbitmq.names import tier_queue, work_queue
from rainier_queue.drivers.rabbitmq.settings import RabbitMQSettings
from rainier_queue.errors import ConfigurationError, UnknownOption


def read(url: str, **options: object) -> RabbitMQSettings:
    queue = open_queue(url, options)
    assert isinstance(queue, RabbitMQQueue)
    return queue.settings


def test_the_url_gives_host_port_vhost_and_credentials_and_the_query_the_driver_options() -> None:
    settings = read("amqp://app:p%40ss@rabbit.internal:5673/jobs%2Fprod?prefix=app.&delays=30s,1s")

    assert (settings.host, settings.port, settings.vhost) == ("rabbit.internal", 5673, "jobs/prod")
    assert (settings.username, settings.password) == ("app", "p@ss")
    assert settings.prefix == "app."
    assert settings.delays == (timedelta(seconds=1), timedelta(seconds=30))
    assert not settings.tls


def test_left_out_parts_take_rabbitmqs_defaults_and_the_documented_tiers() -> None:
    settings = read("amqp://localhost")

    assert (settings.port, settings.vhost, settings.username) == (5672, "/", "guest")
    assert settings.delivery_limit == 20
    assert settings.delays[0] == timedelta(seconds=1)
    assert settings.delays[-1] == timedelta(hours=1)
    assert settings.lease == timedelta(minutes=30), "the server's consumer_timeout by default"


def test_options_beside_the_url_win_over_its_query() -> None:
    settings = read("amqp://localhost/?delivery_limit=3", delivery_limit=7)
    assert settings.delivery_limit == 7


def test_amqps_checks_the_certificate_unless_told_otherwise() -> None:
    checked = read("amqps://rabbit.internal/").ssl_context()
    assert checked is not None
    assert checked.verify_mode == ssl.CERT_REQUIRED
    assert checked.check_hostname
    assert read("amqps://rabbit.internal/").port == 5671

    skipped = read("amqps://rabbit.internal/?insecure_skip_verify=true").ssl_context()
    assert skipped is not None
    assert skipped.verify_mode == ssl.CERT_NONE


def test_tls_options_on_a_plain_url_are_refused_with_the_scheme_to_use() -> None:
    with pytest.raises(ConfigurationError, match="amqps://"):
        read("amqp://localhost/?insecure_skip_verify=true")


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("prefix=amq.x.", "keeps for itself"),
        ("prefix=a%20b.", "letters, digits"),
        ("delays=0s", "longer than zero"),
        ("delivery_limit=0", "delivery_limit"),
    ],
)
def test_a_bad_option_is_refused_with_what_to_write(query: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        read(f"amqp://localhost/?{query}")


def test_a_misspelt_option_is_refused_with_a_suggestion() -> None:
    with pytest.raises(UnknownOption, match="Did you mean `delays`"):
        read("amqp://localhost/?delasy=1s")


def test_the_password_never_shows_in_a_description_or_repr() -> None:
    queue = open_queue("amqp://app:hunter2-secret@localhost/")
    assert "hunter2-secret" not in queue.describe()
    assert "hunter2-secret" not in repr(queue)
    assert isinstance(queue, RabbitMQQueue)
    assert "hunter2-secret" not in repr(queue.settings)


def test_queue_names_are_encoded_so_no_two_collide_and_the_client_takes_them() -> None:
    assert work_queue("rq.", "emails") == "rq.jobs.emails"
    assert work_queue("rq.", "with space") == "rq.jobs.with:20space"
    assert work_queue("rq.", "a.b") != work_queue("rq.", "a:2eb.")
    assert tier_queue("rq.", "a b", timedelta(milliseconds=250)) == "rq.delay.250.a:20b"
