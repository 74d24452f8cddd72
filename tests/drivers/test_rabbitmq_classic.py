# SPDX-License-Identifier: MIT
"""RabbitMQ with `queue_type=classic`: classic queues, asked for by name and called lossy.

Classic queues keep no `x-delivery-count` and enforce no `x-delivery-limit`,
so the driver counts a delivery RabbitMQ marks redelivered (a channel that
closed with the job unsettled: a worker that died) by republishing the job
with that attempt folded in; a job that keeps killing its worker so reaches
its last attempt, which these tests show by closing queues that hold a job.
The capabilities say the queues may lose an accepted job, `doctor` warns,
and provisioning refuses an existing queue of the other type, naming the fix.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aio_pika
import pytest

from rainier_queue.connections import open_queue
from rainier_queue.errors import ConfigurationError

from .conftest import a_job
from .rabbitmq_emails import HOST, emails_prefix, opened

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    async with emails_prefix("c") as prefix:
        yield prefix


async def quorum_refusal(name: str, arguments: dict[str, Any]) -> str:
    """What RabbitMQ says to declaring `name` with `arguments` as a quorum queue (empty: it
    took it)."""
    connection = await aio_pika.connect(f"amqp://guest:guest@{HOST}/")
    try:
        channel = await (await connection.channel()).get_underlay_channel()
        try:
            await channel.queue_declare(
                name, durable=True, arguments={**arguments, "x-queue-type": "quorum"}
            )
        except Exception as exc:
            return str(exc)
        return ""
    finally:
        await connection.close()


async def test_classic_queues_are_declared_only_when_asked_for_and_called_lossy(
    prefix: str,
) -> None:
    classic = opened(prefix, queue_type="classic")
    try:
        await classic.provision(["emails"])
        warnings = await classic.health_warnings()
        await classic.push(a_job("emails"))
        assert await classic.size("emails") == 1
    finally:
        await classic.aclose()
    assert classic.capabilities.may_lose_accepted_job
    assert any("lossy" in w and "queue_type=classic" in w for w in warnings), warnings
    topology = getattr(classic, "_topology")  # noqa: B009 - the driver's own declarations
    for _, name, arguments in topology.wanted(["emails"]):
        assert "'x-queue-type'" in await quorum_refusal(name, arguments), name

    quorum = opened(prefix)
    try:
        assert not quorum.capabilities.may_lose_accepted_job
        assert not [w for w in await quorum.health_warnings() if "lossy" in w]
    finally:
        await quorum.aclose()


def test_a_queue_type_that_is_neither_is_refused_naming_both() -> None:
    with pytest.raises(ConfigurationError, match="quorum, classic"):
        open_queue(f"amqp://guest:guest@{HOST}/?queue_type=mirrored")


@pytest.mark.parametrize(("first", "then"), [("quorum", "classic"), ("classic", "quorum")])
async def test_provision_refuses_an_existing_queue_of_the_other_type_naming_the_fix(
    prefix: str, first: str, then: str
) -> None:
    made = opened(prefix, queue_type=first)
    try:
        await made.provision(["emails"])
    finally:
        await made.aclose()
    other = opened(prefix, queue_type=then)
    try:
        with pytest.raises(ConfigurationError) as refused:
            await other.provision(["emails"])
        findings = await other.check_provisioned(["emails"])
    finally:
        await other.aclose()
    message = str(refused.value)
    assert f"exists as a {first} queue" in message
    assert f"`queue_type={first}` to keep using it" in message
    assert "rabbitmqctl delete_queue" in message
    assert findings, "doctor says nothing of a queue of the other type"
    assert all(not f.provisioning_fixes for f in findings)


async def test_on_classic_queues_each_worker_that_dies_holding_a_job_costs_it_an_attempt(
    prefix: str,
) -> None:
    first = opened(prefix, queue_type="classic")
    try:
        await first.provision(["emails"])
        await first.push(a_job("emails"))
    finally:
        await first.aclose()
    seen: list[int] = []
    for _ in range(3):
        worker = opened(prefix, queue_type="classic")
        try:
            [reservation] = await worker.reserve("emails")
            seen.append(reservation.job.attempts)
        finally:
            await worker.aclose()  # its channel closes with the job unsettled, as if it died
    last = opened(prefix, queue_type="classic")
    try:
        [reservation] = await last.reserve("emails")
        seen.append(reservation.job.attempts)
        await last.acknowledge(reservation)
        assert await last.size("emails") == 0
    finally:
        await last.aclose()
    assert seen == [1, 2, 3, 4]
