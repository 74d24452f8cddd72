# SPDX-License-Identifier: MIT
"""The queues a connection needs on the broker, made and checked: RabbitMQ's `Provisionable`.

A push never declares a queue (`push_creates_resources` is False): the shape
of a queue is a decision, and RabbitMQ refuses to change it later without
deleting the queue and its jobs. `rainier-queue provision` declares, per
queue:

- the **work queue**, a quorum queue (replicated, fsynced before a confirm)
  with `x-delivery-limit` (a job delivered more than that many times over
  without being settled, because it keeps killing its worker, is
  dead-lettered by the broker itself) and an **at-least-once** dead-letter
  target: `x-dead-letter-strategy=at-least-once` with
  `x-overflow=reject-publish`, without which RabbitMQ 3.10 silently falls
  back to at-most-once and a job can vanish between the two queues;
- one **delay tier** per entry of `delays`: a quorum queue whose fixed
  `x-message-ttl` dead-letters into the work queue. Per-message TTLs expire
  only at the head of a queue, so a tier holds one delay only;

and, once per connection, the **failed queue** with the fanout exchange the
work queues dead-letter into.

With `queue_type=classic` the same queues are classic durable ones, which
RabbitMQ gives none of the above but the TTL and the dead-letter exchange
(`CLASSIC_COSTS`). A connection's type and an existing queue's must agree:
`provision` refuses a queue of the other type rather than leave workers on
one they were not configured for.

Declaring is idempotent. An existing queue declared differently (a classic
queue where a quorum one is expected, another delivery limit or TTL) is
refused by RabbitMQ; the check reports it as a `Finding` that provisioning
cannot fix, since the only fix deletes the queue, with what to do instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ...errors import BrokerRejected, ConfigurationError
from ...queue import Finding
from .connection import AMQPClient, Missing, translated
from .names import failed_exchange, failed_queue, milliseconds, tier_queue, work_queue
from .settings import RabbitMQSettings

AT_LEAST_ONCE: dict[str, Any] = {
    "x-queue-type": "quorum",
    "x-dead-letter-strategy": "at-least-once",
    "x-overflow": "reject-publish",
}
CLASSIC: dict[str, Any] = {"x-queue-type": "classic"}
CLASSIC_COSTS = (
    "classic queues (queue_type=classic) are lossy: each lives on one node, unreplicated; "
    "a delayed or retried job moves from its delay tier to the work queue by at-most-once "
    "dead-lettering, so a broker that crashes in that moment can lose it; and RabbitMQ "
    "counts no deliveries there, so attempts are counted by the driver and no delivery "
    "limit stops a job that keeps killing its worker before the worker reads it again"
)
"""What choosing classic queues gives up: `doctor` says it, and the driver's page."""


class Topology:
    """Declares and checks the queues of a connection, under its prefix."""

    def __init__(self, client: AMQPClient, settings: RabbitMQSettings) -> None:
        self._client = client
        self._settings = settings

    def wanted(self, queues: Sequence[str]) -> list[tuple[str | None, str, dict[str, Any]]]:
        """(queue, name on the broker, arguments) for all `queues` need, failed queue first."""
        prefix = self._settings.prefix
        base = CLASSIC if self._settings.classic else AT_LEAST_ONCE
        out: list[tuple[str | None, str, dict[str, Any]]] = [
            (None, failed_queue(prefix), {"x-queue-type": self._settings.queue_type})
        ]
        for queue in dict.fromkeys(queues):
            work = work_queue(prefix, queue)
            out.append((queue, work, self.work_arguments()))
            for tier in self._settings.delays:
                arguments = {
                    **base,
                    "x-message-ttl": milliseconds(tier),
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": work,
                }
                out.append((queue, tier_queue(prefix, queue, tier), arguments))
        return out

    def work_arguments(self) -> dict[str, Any]:
        if self._settings.classic:  # no delivery limit, no at-least-once dead letters
            return {**CLASSIC, "x-dead-letter-exchange": failed_exchange(self._settings.prefix)}
        return {
            **AT_LEAST_ONCE,
            "x-delivery-limit": self._settings.delivery_limit,
            "x-dead-letter-exchange": failed_exchange(self._settings.prefix),
        }

    async def provision(self, queues: Sequence[str]) -> list[str]:
        """Declare what is missing; one line per queue or exchange made."""
        done: list[str] = []
        exchange = failed_exchange(self._settings.prefix)
        if not await self._exchange_exists(exchange):
            channel = await self._client.inspecting()
            async with translated(f"declare exchange {exchange!r}"):
                await (await channel.get_underlay_channel()).exchange_declare(
                    exchange=exchange, exchange_type="fanout", durable=True
                )
            done.append(f"declared exchange `{exchange}` (fanout, for dead letters)")
        other = self._other_type().wanted(queues)
        for at, (_queue, name, arguments) in enumerate(self.wanted(queues)):
            try:
                await self._client.declare(name)
            except Missing:
                pass
            else:  # exists; another type is refused, other arguments are the check's to report
                await self._refuse_other_type(name, arguments, other[at][2])
                continue
            await self._client.declare(name, arguments=arguments)
            done.append(f"declared queue `{name}` ({_shape(arguments)})")
        channel = await self._client.inspecting()
        async with translated(f"bind queue {failed_queue(self._settings.prefix)!r}"):
            await (await channel.get_underlay_channel()).queue_bind(
                failed_queue(self._settings.prefix), exchange, ""
            )
        return done

    async def check(self, queues: Sequence[str]) -> list[Finding]:
        """What is missing or declared otherwise, queue by queue; declares nothing new."""
        findings: list[Finding] = []
        exchange = failed_exchange(self._settings.prefix)
        if not await self._exchange_exists(exchange):
            findings.append(Finding(subject=f"exchange `{exchange}`", problem="does not exist"))
        for queue, name, arguments in self.wanted(queues):
            subject = f"queue `{name}`"
            try:
                await self._client.declare(name)
            except Missing:
                findings.append(Finding(subject=subject, queue=queue, problem="does not exist"))
                continue
            try:  # the same declaration is a no-op on an equal queue, refused on another
                await self._client.declare(name, arguments=arguments)
            except BrokerRejected as exc:
                findings.append(
                    Finding(
                        subject=subject,
                        queue=queue,
                        problem=f"exists with other arguments than {_shape(arguments)} ({exc})",
                        provisioning_fixes=False,
                        fix=(
                            "RabbitMQ cannot change a queue's type, delivery limit or TTL in "
                            "place: let workers drain it, delete it (`rabbitmqctl delete_queue "
                            f"{name}`) and run provision again, or set the connection's "
                            "`delivery_limit` and `delays` to what the queue has"
                        ),
                    )
                )
        return findings

    def _other_type(self) -> Topology:
        other = "quorum" if self._settings.classic else "classic"
        return Topology(self._client, replace(self._settings, queue_type=other))

    async def _is(self, name: str, arguments: dict[str, Any] | None) -> bool:
        """Whether RabbitMQ takes `arguments` as those of the existing queue `name`."""
        try:
            await self._client.declare(name, arguments=arguments)
        except BrokerRejected:
            return False
        return True

    async def _refuse_other_type(
        self, name: str, arguments: dict[str, Any], others: dict[str, Any]
    ) -> None:
        """`ConfigurationError` naming the fix if the existing queue `name` is of the other type
        than this connection's `queue_type`: RabbitMQ refuses our arguments naming the type
        (it names the first argument that differs, in an order of its own), or takes the
        other type's as this driver declares them, or (a classic queue made elsewhere) none.
        """
        try:
            await self._client.declare(name, arguments=arguments)
            return
        except BrokerRejected as exc:
            refused = "x-queue-type" in str(exc)
        if not refused:
            bare = not self._settings.classic and await self._is(name, {})
            refused = bare or await self._is(name, others)
        if refused:
            wanted = self._settings.queue_type
            other = "quorum" if wanted == "classic" else "classic"
            raise ConfigurationError(
                f"the RabbitMQ queue {name!r} exists as a {other} queue, and this connection "
                f"says `queue_type={wanted}`; a queue cannot change type in place: set the "
                f"connection's `queue_type={other}` to keep using it, or let workers drain it, "
                f"delete it (`rabbitmqctl delete_queue {name}`) and run provision again"
            ) from None

    async def _exchange_exists(self, name: str) -> bool:
        channel = await self._client.inspecting()
        try:
            async with translated(f"look up exchange {name!r}"):
                await (await channel.get_underlay_channel()).exchange_declare(
                    exchange=name, passive=True
                )
        except Missing:
            return False
        return True


def _shape(arguments: dict[str, Any]) -> str:
    parts = [str(arguments.get("x-queue-type", "classic"))]
    if "x-delivery-limit" in arguments:
        parts.append(f"delivery limit {arguments['x-delivery-limit']}")
    if "x-message-ttl" in arguments:
        parts.append(f"TTL {arguments['x-message-ttl']} ms")
    if arguments.get("x-dead-letter-strategy") == "at-least-once":
        parts.append("dead letters at least once")
    return ", ".join(parts)


__all__ = ["AT_LEAST_ONCE", "CLASSIC", "CLASSIC_COSTS", "Topology"]
