# SPDX-License-Identifier: MIT
"""RabbitMQ provisioning: what `provision` declares, and a queue declared otherwise as a Finding.

RabbitMQ cannot change a queue's type, delivery limit or TTL in place, so
provisioning never touches an existing queue; `check_provisioned` (what
`doctor` shows) reports one declared otherwise as a finding that
provisioning does not fix, with the steps that do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aio_pika
import pytest

from rainier_queue.drivers.rabbitmq.names import failed_queue, work_queue
from rainier_queue.errors import ConfigurationError, NotProvisioned

from .conftest import a_job
from .rabbitmq_emails import HOST, emails_prefix, opened

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    async with emails_prefix("p") as prefix:
        yield prefix


async def declare_classic(name: str) -> None:
    connection = await aio_pika.connect(f"amqp://guest:guest@{HOST}/")
    try:
        channel = await (await connection.channel()).get_underlay_channel()
        await channel.queue_declare(name, durable=True)
    finally:
        await connection.close()


async def test_provision_declares_the_work_queue_its_tier_and_the_failed_queue_once(
    prefix: str,
) -> None:
    queue = opened(prefix)
    try:
        with pytest.raises(NotProvisioned, match="rainier-queue provision --queue emails"):
            await queue.push(a_job("emails"))
        before = await queue.check_provisioned(["emails"])
        done = await queue.provision(["emails"])
        after = await queue.check_provisioned(["emails"])
        again = await queue.provision(["emails"])
        await queue.push(a_job("emails"))
        assert await queue.size("emails") == 1
    finally:
        await queue.aclose()

    assert {f.subject for f in before} == {
        f"exchange `{failed_queue(prefix)}`",
        f"queue `{failed_queue(prefix)}`",
        f"queue `{work_queue(prefix, 'emails')}`",
        f"queue `{prefix}delay.1000.emails`",
    }
    assert all(f.problem == "does not exist" and f.provisioning_fixes for f in before)
    assert len(done) == 4
    assert any("delivery limit 20" in line and "at least once" in line for line in done), done
    assert after == []
    assert again == []


async def test_a_queue_declared_with_another_delivery_limit_is_a_finding_provisioning_cannot_fix(
    prefix: str,
) -> None:
    first = opened(prefix)
    try:
        await first.provision(["emails"])
    finally:
        await first.aclose()
    other = opened(prefix, delivery_limit="5")
    try:
        findings = await other.check_provisioned(["emails"])
    finally:
        await other.aclose()

    [finding] = findings
    assert finding.subject == f"queue `{work_queue(prefix, 'emails')}`"
    assert finding.queue == "emails"
    assert "delivery limit 5" in finding.problem
    assert not finding.provisioning_fixes
    assert "delete it" in finding.fix
    assert "delivery_limit" in finding.fix


async def test_a_classic_queue_where_a_quorum_one_is_expected_is_a_finding_provision_refuses(
    prefix: str,
) -> None:
    await declare_classic(work_queue(prefix, "emails"))
    queue = opened(prefix)
    try:
        with pytest.raises(ConfigurationError, match="`queue_type=classic` to keep using it"):
            await queue.provision(["emails"])  # never changes it, nor serves it as quorum
        findings = await queue.check_provisioned(["emails"])
    finally:
        await queue.aclose()

    # Refused at the work queue, before its tier: the tier is missing, the work queue other.
    [finding] = [f for f in findings if f.subject == f"queue `{work_queue(prefix, 'emails')}`"]
    assert "quorum" in finding.problem
    assert not finding.provisioning_fixes
    assert f"rabbitmqctl delete_queue {work_queue(prefix, 'emails')}" in finding.fix
