# SPDX-License-Identifier: MIT
"""The SQS driver's URL, options and names, read before anything connects (no server needed).

Pins the upstream SQS checklist's configuration items: the driver's name,
its queue URLs kept as given, visibility and wait configurable, credentials
given both or neither, and never shown.
"""

from __future__ import annotations

import pytest

pytest.importorskip("aiobotocore")

from rainier_queue.drivers import open_queue
from rainier_queue.drivers.sqs import SQSQueue
from rainier_queue.drivers.sqs.names import MAX_NAME, Names
from rainier_queue.errors import ConfigurationError, UnknownOption


def opened(url: str, **options: object) -> SQSQueue:
    queue = open_queue(url, options)
    assert isinstance(queue, SQSQueue)
    return queue


def test_the_driver_is_named_sqs_and_describes_itself_without_credentials() -> None:
    queue = opened("sqs://AKIDEXAMPLE:s3cretKey@127.0.0.1:5000/?tls=false&region=eu-west-1")

    assert queue.name == "sqs"
    assert "s3cretKey" not in queue.describe()
    assert "s3cretKey" not in repr(queue.settings)
    assert "AKIDEXAMPLE" not in queue.describe()
    assert queue.settings.endpoint == "http://127.0.0.1:5000"
    assert queue.settings.region == "eu-west-1"


def test_an_endpoint_is_https_unless_told_and_aws_is_used_without_a_host() -> None:
    assert opened("sqs://k:s@sqs.internal:443/").settings.endpoint == "https://sqs.internal:443"
    assert opened("sqs:///?region=eu-west-1").settings.endpoint is None


def test_https_is_checked_against_botocores_authorities_a_given_file_or_not_at_all() -> None:
    assert opened("sqs://k:s@sqs.internal:443/").settings.verify is True
    given = opened("sqs://k:s@sqs.internal:443/?tls_ca=/etc/ssl/corp-ca.pem").settings
    assert given.verify == "/etc/ssl/corp-ca.pem"
    assert opened("sqs://k:s@sqs.internal/?insecure_skip_verify=true").settings.verify is False


def test_a_check_asked_of_plain_http_is_refused_saying_which_to_drop() -> None:
    with pytest.raises(ConfigurationError, match="drop `tls=false` to use HTTPS, or drop `tls_ca`"):
        opened("sqs://k:s@127.0.0.1:5000/?tls=false&tls_ca=/etc/ssl/ca.pem")
    with pytest.raises(ConfigurationError, match="no certificate to skip checking"):
        opened("sqs://k:s@127.0.0.1:5000/?tls=false&insecure_skip_verify=true")
    with pytest.raises(ConfigurationError, match="neither true nor false"):
        opened("sqs://k:s@127.0.0.1:5000/?insecure_skip_verify=maybe")


async def test_doctor_warns_of_plain_http_to_another_machine_and_of_an_unchecked_certificate() -> (
    None
):
    local = opened("sqs://k:s@127.0.0.1:5000/?tls=false")
    remote = opened("sqs://k:s@sqs.internal:5000/?tls=false")
    unchecked = opened("sqs://k:s@sqs.internal/?insecure_skip_verify=true")
    checked = opened("sqs:///?region=eu-west-1")

    assert await local.health_warnings() == []
    [plain] = await remote.health_warnings()
    assert "not encrypted" in plain
    assert "drop `tls=false`" in plain
    [skipped] = await unchecked.health_warnings()
    assert "insecure_skip_verify=true" in skipped
    assert await checked.health_warnings() == []
    for queue in (local, remote, unchecked, checked):
        await queue.aclose()


def test_visibility_and_wait_are_configurable_within_what_sqs_takes() -> None:
    queue = opened("sqs:///?lease=30s&wait=5s")
    assert queue.lease.total_seconds() == 30
    assert queue.settings.wait.total_seconds() == 5

    with pytest.raises(ConfigurationError, match="12 hours"):
        opened("sqs:///?lease=13h")
    with pytest.raises(ConfigurationError, match="at most 20s"):
        opened("sqs:///?wait=30s")
    with pytest.raises(ConfigurationError, match="`lease` must be longer than zero"):
        opened("sqs:///?lease=0s")


def test_a_key_without_its_secret_is_refused_naming_the_ambient_chain() -> None:
    with pytest.raises(ConfigurationError, match="ambient credential chain") as caught:
        opened("sqs:///", key="AKIDEXAMPLE")
    assert "AKIDEXAMPLE" not in str(caught.value)


def test_a_misspelt_option_is_refused_with_a_suggestion() -> None:
    with pytest.raises(UnknownOption, match="Did you mean `prefix`"):
        opened("sqs:///?prefxi=app-")


def test_an_explicit_queue_url_is_used_as_given() -> None:
    url = "https://sqs.eu-west-1.amazonaws.com/123456789012/mail"
    queue = opened("sqs:///", queue_urls={"emails": url})

    assert queue.names.url_of("emails") == url
    assert queue.names.work("emails") == "mail"
    with pytest.raises(ConfigurationError, match="not an SQS queue URL"):
        opened("sqs:///", queue_urls="emails=mail")


def test_a_message_size_beyond_what_sqs_takes_is_refused() -> None:
    assert opened("sqs:///?max_message_size=1048576").settings.max_message_size == 1048576
    with pytest.raises(ConfigurationError, match="at most 1048576"):
        opened("sqs:///?max_message_size=2000000")


@pytest.mark.parametrize("fifo", [False, True])
def test_every_queue_name_maps_to_one_sqs_name_that_sqs_takes(fifo: bool) -> None:
    names = Names("app-", fifo=fifo, urls={})
    queues = ["emails", "émails ✉", "a:b/c.d", "with space", "x" * 150, "y-failed", "rq-failed"]
    mapped = [names.work(q) for q in queues]

    assert mapped[0] == ("app-emails.fifo" if fifo else "app-emails")
    assert len(set(mapped)) == len(queues), "two names never share a queue"
    assert names.failed() not in mapped, "no queue name meets the failed queue"
    for name in [*mapped, names.failed()]:
        assert len(name) <= MAX_NAME
        assert name.endswith(".fifo") == fifo
        stem = name.removesuffix(".fifo")
        assert stem.replace("-", "").replace("_", "").isalnum(), name
        assert stem.isascii(), name


def test_a_lock_store_for_batches_needs_a_context_that_opens_one_and_hides_its_secret() -> None:
    # The driver registry's own `open_queue` hands no store opener: refused, naming the way.
    with pytest.raises(ConfigurationError, match="cannot open one"):
        opened("sqs:///?region=eu-west-1&locks=redis%3A%2F%2F%3Apw%40cache%3A6379")

    from rainier_queue.connections import open_queue as open_connection

    queue = open_connection("sqs:///?region=eu-west-1&locks=redis%3A%2F%2F%3Apw%40cache%3A6379")
    assert isinstance(queue, SQSQueue)
    assert queue.capabilities.batches, "a store named: batches kept"
    assert not queue.capabilities.batch_callbacks_exactly_once
    assert not SQSQueue.capabilities.batches, "the class, without one, keeps none"
    assert "pw" not in queue.describe()
    assert "pw" not in repr(queue.settings)
