# SPDX-License-Identifier: MIT
"""Kafka provisioning: the queue makes its own topics when asked, never on a push.

`provision` creates each queue's topic with the connection's `partitions`
and its failed topic with one, and `check_provisioned` says what is
missing or short without creating anything, on a broker (Tansu) that
would create a topic the moment anyone produced to it. Tansu cannot add
partitions to a topic (it does not offer CreatePartitions), so growing is
seen here as the clear refusal a broker like it gets; on Kafka it grows.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from rainier_queue.drivers.kafka.names import failed_topic_name, topic_name
from rainier_queue.errors import BrokerRejected, ConfigurationError, NotProvisioned
from rainier_queue.queue import Provisionable

from ..kafka_broker import KafkaBroker
from .conftest import Opener, a_job

pytestmark = pytest.mark.timeout(60)


async def described(tansu: KafkaBroker, *topics: str) -> dict[str, tuple[int, int]]:
    """(partitions, replicas of the first partition) of topics known to exist."""
    admin = AIOKafkaAdminClient(bootstrap_servers=tansu.bootstrap)
    await admin.start()
    try:
        found: list[dict[str, Any]] = await admin.describe_topics(list(topics))
    finally:
        await admin.close()
    return {t["topic"]: (len(t["partitions"]), len(t["partitions"][0]["replicas"])) for t in found}


async def test_provision_makes_each_topic_with_the_partitions_asked_and_a_failed_topic_of_one(
    tansu: KafkaBroker, open_kafka: Opener, prefix: str
) -> None:
    queue = open_kafka(partitions=3)
    assert isinstance(queue, Provisionable)

    before = await queue.check_provisioned(["emails"])
    done = await queue.provision(["emails"])
    after = await queue.check_provisioned(["emails"])
    again = await queue.provision(["emails"])

    topic, failed = topic_name(prefix, "emails"), failed_topic_name(prefix, "emails")
    assert [(f.subject, f.problem, f.provisioning_fixes) for f in before] == [
        (f"topic `{topic}`", "does not exist", True),
        (f"topic `{failed}`", "does not exist", True),
    ]
    assert done == [
        f"created topic `{topic}` with 3 partitions and 1 replica",
        f"created topic `{failed}` with 1 partition and 1 replica",
    ]
    assert await described(tansu, topic, failed) == {topic: (3, 1), failed: (1, 1)}
    assert after == []
    assert again == []
    await queue.push(a_job("emails"))
    assert [r.job.queue for r in await queue.reserve("emails")] == ["emails"]


async def test_a_push_to_a_queue_with_no_topic_is_refused_naming_provision_and_makes_no_topic(
    open_kafka: Opener,
) -> None:
    queue = open_kafka()

    with pytest.raises(NotProvisioned, match="rainier-queue provision --queue reports") as refused:
        await queue.push(a_job("reports"))

    assert refused.value.queue == "reports"
    missing = await queue.check_provisioned(["reports"])
    assert [f.problem for f in missing] == ["does not exist", "does not exist"], (
        "a broker that creates topics on a produce must not have been produced to"
    )


async def test_a_topic_with_fewer_partitions_than_asked_is_found_and_tansu_cannot_grow_it(
    tansu: KafkaBroker, open_kafka: Opener, prefix: str
) -> None:
    topic = topic_name(prefix, "thin")
    await tansu.create_topics([topic, failed_topic_name(prefix, "thin")], partitions=1)
    queue = open_kafka(partitions=4)

    [finding] = await queue.check_provisioned(["thin"])
    with pytest.raises(BrokerRejected, match="cannot add partitions") as refused:
        await queue.provision(["thin"])

    assert finding.subject == f"topic `{topic}`"
    assert finding.problem == "has 1 partition, and `partitions` asks for 4"
    assert finding.provisioning_fixes
    assert finding.queue == "thin"
    assert "set `partitions` to 1" in str(refused.value)
    assert await described(tansu, topic) == {topic: (1, 1)}


async def test_a_topic_with_more_partitions_than_asked_is_left_as_it_is(
    tansu: KafkaBroker, open_kafka: Opener, prefix: str
) -> None:
    await tansu.create_topics(
        [topic_name(prefix, "wide"), failed_topic_name(prefix, "wide")], partitions=6
    )
    queue = open_kafka(partitions=2)

    assert await queue.check_provisioned(["wide"]) == []
    assert await queue.provision(["wide"]) == []


async def test_replication_short_of_what_is_asked_is_found_for_a_person_to_fix(
    tansu: KafkaBroker, open_kafka: Opener, prefix: str
) -> None:
    await tansu.create_topics(
        [topic_name(prefix, "solo"), failed_topic_name(prefix, "solo")], partitions=1
    )
    queue = open_kafka(replication=2)

    found = await queue.check_provisioned(["solo"])

    assert [(f.problem, f.provisioning_fixes) for f in found] == [
        ("has 1 replica, and `replication` asks for 2", False),
        ("has 1 replica, and `replication` asks for 2", False),
    ]
    assert "kafka-reassign-partitions" in found[0].fix
    assert await queue.provision(["solo"]) == [], "provisioning never moves a topic's data"


@pytest.mark.parametrize("option", ["partitions", "replication"])
@pytest.mark.parametrize("value", ["0", "-2", "three"])
def test_a_partition_or_replica_count_that_is_not_a_positive_number_is_refused(
    option: str, value: str
) -> None:
    from rainier_queue.drivers.kafka.settings import read_settings

    with pytest.raises(ConfigurationError, match=f"`{option}` must be a whole number"):
        read_settings(f"kafka://b:9092/?locks=memory%3A%2F%2F&{option}={value}", {})
