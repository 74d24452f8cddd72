# SPDX-License-Identifier: MIT
"""aio-pika underneath: one connection, a channel per purpose, one place errors are translated.

One connection per queue object (a worker process has one), opened on first
use and opened again on the next call after it was lost. aio-pika's robust
connection is not used: it would consume again behind the driver's back
after a reconnect, handing out deliveries whose tags the driver never saw,
while a delivery tag is exactly what a reservation holds. Here, a lost
connection makes every reservation on it stale (`LeaseLost`, since the
broker has put the jobs back), and the next reserve consumes afresh.

Channels, one per purpose, so a failure on one does not take the others:

- **publishing**: publisher confirms on, unroutable messages returned. A push
  is confirmed when the broker has it on disk on a quorum of its replicas.
- **inspecting**: declares and purges. A passive declare of a queue that
  does not exist closes its channel (AMQP's way of saying 404), so this one
  is reopened whenever that happened.
- **consuming**: owned by the consumer part (consuming.py).

A call on a channel is never cut short by its caller's cancellation
(`shielded`): aiormq closes a channel whose call was cancelled mid-way, and
until the broker has answered that close every later call on the channel
fails ("Channel closed by RPC timeout"), so a worker's idle wait, which the
worker cancels whenever a slot frees, turned into an outage for the next
call. The call finishes as its own task; the caller stops waiting at once.
An inspecting channel closed that way all the same (by a call made outside
this module) is replaced on the next call instead of reported as an outage.

Every call that reaches the broker goes through `translated()`, so the
worker sees `BrokerUnavailable` (wait and retry), `OutcomeUnknown` (a push
whose confirm never came), or `BrokerRejected` (a refusal, a nack), never an
aio-pika or aiormq class.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractConnection
from aiormq import exceptions as ax
from pamqp import commands as spec

from ...errors import BrokerRejected, BrokerUnavailable, OutcomeUnknown, TLSVerificationError
from ..tls import is_verification_failure, verification_failed, warn_unverified
from . import deliveries, frames
from .publishing import publish_batch
from .settings import RabbitMQSettings

log = logging.getLogger("rainier_queue.rabbitmq")

T = TypeVar("T")

CONNECT_TIMEOUT = 10.0
"""Seconds to wait for the broker to accept a connection."""
HEARTBEAT = 3
"""Seconds of AMQP heartbeat asked of the broker. aiormq gives up on a connection that
sent nothing for (3 + 1) x 3 = 12 s, and RabbitMQ on a client silent for two of them: so
a connection lost without a reset (a cable, a firewall, a machine gone) fails every call
on it within about 12 s, as an outage, instead of waiting for TCP for many minutes."""


class Missing(Exception):
    """A queue or exchange the call named does not exist (AMQP's 404, or a returned message)."""


class Unroutable(Missing):
    """A published message reached no queue: its queue was never provisioned."""


_GONE: tuple[type[BaseException], ...] = (
    ax.AMQPConnectionError,
    ax.ChannelInvalidStateError,
    ConnectionError,
    OSError,
    TimeoutError,
)


@contextlib.asynccontextmanager
async def translated(what: str, *, sent: bool = False) -> AsyncIterator[None]:
    """Turn aio-pika's and aiormq's exceptions into this library's, naming what was being done.

    `sent`: the call wrote something whose effect is unknown if its answer never
    comes (a publish waiting for its confirm), so an outage is `OutcomeUnknown`.
    """
    try:
        yield
    except Missing:
        raise
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise  # the caller was cancelled
        # aiormq cancels what waits on a connection it gave up on (missed heartbeats)
        raise _outage(what, exc, sent) from exc
    except ax.ChannelNotFoundEntity as exc:
        raise Missing(str(exc)) from exc
    except ax.PublishError as exc:
        raise Unroutable(str(exc)) from exc
    except ax.DeliveryError as exc:
        raise BrokerRejected(
            f"RabbitMQ refused to {what} (it answered with a nack: a queue at its length "
            f"limit, or an internal error): {exc}"
        ) from exc
    except (ax.ChannelAccessRefused, ax.ChannelPreconditionFailed, ax.ChannelLockedResource) as exc:
        raise BrokerRejected(f"RabbitMQ refused to {what}: {exc}") from exc
    except (ax.AuthenticationError, ax.ProbableAuthenticationError) as exc:
        raise BrokerRejected(
            f"RabbitMQ refused the credentials while trying to {what}: check the user and "
            "password in the URL, and that the user may use its virtual host"
        ) from exc
    except ax.ChannelClosed as exc:
        raise _outage(what, exc, sent) from exc
    except _GONE as exc:
        raise _outage(what, exc, sent) from exc
    except RuntimeError as exc:  # aiormq's word for a call on a connection it closed
        if "closed" not in str(exc):
            raise
        raise _outage(what, exc, sent) from exc


def _outage(what: str, exc: BaseException, sent: bool) -> BrokerUnavailable:
    text = str(exc) or type(exc).__name__
    if sent:
        return OutcomeUnknown(
            f"the outcome is unknown: RabbitMQ did not confirm in time while trying to {what} "
            f"({text}); the message may or may not have been stored"
        )
    return BrokerUnavailable(f"RabbitMQ is unreachable while trying to {what}: {text}")


class AMQPClient:
    """The connection and its publishing and inspecting channels, opened on first use."""

    def __init__(self, settings: RabbitMQSettings) -> None:
        self.settings = settings
        self._connection: AbstractConnection | None = None
        self._publishing: AbstractChannel | None = None
        self._inspecting: AbstractChannel | None = None
        self._opening: asyncio.Lock | None = None
        self.generation = 0
        """Counts connections opened, so a part can tell its channel belongs to an old one."""

    def _lock(self) -> asyncio.Lock:
        if self._opening is None:
            self._opening = asyncio.Lock()
        return self._opening

    async def connection(self) -> AbstractConnection:
        """The open connection, opened now if there is none or it was lost."""
        current = self._connection
        if current is not None and _open(current):
            return current
        async with self._lock():
            current = self._connection
            if current is not None and _open(current):
                return current
            if current is not None:  # lost: let it go without waiting on its socket
                asyncio.get_running_loop().create_task(_close_quietly(current))
            self._connection = None
            self._connection = await self._connect()
            self._publishing = self._inspecting = None
            self.generation += 1
            return self._connection

    async def _connect(self) -> AbstractConnection:
        settings = self.settings
        where = f"{settings.host}:{settings.port}"
        if settings.tls and not settings.verify:
            warn_unverified(f"RabbitMQ at {where}")
        frames.install()  # frames read in bulk (frames.py)
        deliveries.install()  # and handed to the consumer without a task each (deliveries.py)
        try:
            async with translated(f"connect to {where}"):
                return await _routed(
                    lambda: aio_pika.connect(
                        host=settings.host,
                        port=settings.port,
                        login=settings.username,
                        password=settings.password,
                        virtualhost=settings.vhost,
                        ssl=settings.tls,
                        ssl_context=settings.ssl_context(),
                        timeout=CONNECT_TIMEOUT,
                        client_properties={"connection_name": "rainier-queue"},
                        heartbeat=HEARTBEAT,
                    )
                )
        except BrokerUnavailable as exc:
            if settings.tls and "wrong version number" in str(exc).lower():
                raise TLSVerificationError(
                    f"the RabbitMQ server at {where} does not speak TLS on that port, and "
                    "`amqps://` asks for it: dial its TLS listener (5671 by default), or give "
                    "the broker one; nothing was sent in the clear",
                    host=where,
                ) from None
            if settings.tls and is_verification_failure(exc):
                raise verification_failed(
                    "the RabbitMQ server",
                    where,
                    exc.__cause__ or exc,
                    fix="give the authority that signed its certificate in `ssl_ca_certs`, or "
                    "dial it by the name its certificate carries",
                ) from None
            raise

    async def channel(self, *, confirms: bool = False) -> AbstractChannel:
        """A new channel on the current connection."""
        connection = await self.connection()
        async with translated("open a channel"):
            return await connection.channel(publisher_confirms=confirms, on_return_raises=confirms)

    async def publishing(self) -> AbstractChannel:
        channel = self._publishing
        if channel is None or channel.is_closed or self._connection_lost():
            channel = self._publishing = await self.channel(confirms=True)
        return channel

    async def inspecting(self) -> AbstractChannel:
        channel = self._inspecting
        if channel is None or channel.is_closed or self._connection_lost():
            channel = self._inspecting = await self.channel()
        return channel

    def _connection_lost(self) -> bool:
        return self._connection is None or not _open(self._connection)

    def blocked(self) -> bool:
        """Whether the broker has blocked this connection's publishers (a memory or disk alarm)."""
        connection = self._connection
        underlay = getattr(getattr(connection, "transport", None), "connection", None)
        unblocked = getattr(underlay, "_Connection__connection_unblocked", None)
        return isinstance(unblocked, asyncio.Event) and not unblocked.is_set()

    async def publish(
        self, routing_key: str, body: bytes, properties: spec.Basic.Properties
    ) -> None:
        """Publish to the default exchange and wait for the broker's confirm.

        A message no queue takes is returned (`Unroutable`); a nack is
        `BrokerRejected`; no confirm within `confirm_timeout` is `OutcomeUnknown`.
        """
        [outcome] = await self.publish_many([(routing_key, body, properties)])
        if outcome is not None:
            raise outcome

    async def publish_many(
        self, messages: Sequence[tuple[str, bytes, spec.Basic.Properties]]
    ) -> list[Exception | None]:
        """Publish each `(routing_key, body, properties)`, all written before any confirm is
        awaited; each one's outcome as `publish` would raise it (None: confirmed).

        The whole batch is written as one block under one hold of the channel's
        lock (publishing.py), without waiting for it to leave the socket: what
        says the broker has a message is its confirm.
        """
        channel = await self.publishing()
        underlay = await channel.get_underlay_channel()
        assert isinstance(underlay, aiormq.Channel), "aio-pika's channel is aiormq's underneath"
        timeout = self.settings.confirm_timeout.total_seconds()
        answers = await publish_batch(underlay, messages, timeout)
        outcomes: list[Exception | None] = []
        for (routing_key, _, _), answer in zip(messages, answers, strict=True):
            outcomes.append(
                await self._translated(routing_key, answer, timeout)
                if isinstance(answer, Exception)
                else None
            )
        return outcomes

    async def _translated(self, routing_key: str, error: Exception, timeout: float) -> Exception:
        """A publish's error as this library's (`translated`), saying so when the broker
        has blocked the connection."""
        try:
            async with translated(f"publish to queue {routing_key!r}", sent=True):
                raise error
        except OutcomeUnknown as exc:
            if self.blocked():
                blocked = OutcomeUnknown(
                    f"RabbitMQ has blocked publishing on this connection (a memory or disk "
                    f"alarm on the broker), and the push to {routing_key!r} was not confirmed "
                    f"within {timeout:g}s; it may or may not be stored"
                )
                blocked.__cause__ = exc
                return blocked
            return exc
        except Exception as exc:
            return exc
        raise AssertionError("unreachable: `translated` re-raises what it is given")

    async def declare(self, name: str, *, arguments: dict[str, Any] | None = None) -> int:
        """Declare `name` (durable, with `arguments`), or only look it up when `arguments` is None.

        Returns how many messages it holds ready. `Missing` when a lookup finds none.
        """
        answer = await shielded(
            self._inspect(
                f"declare queue {name!r}",
                lambda underlay: underlay.queue_declare(
                    name, passive=arguments is None, durable=True, arguments=arguments
                ),
            )
        )
        return int(answer.message_count or 0)

    async def purge(self, name: str) -> int:
        answer = await shielded(
            self._inspect(f"purge queue {name!r}", lambda underlay: underlay.queue_purge(name))
        )
        return int(answer.message_count or 0)

    async def _inspect(
        self, what: str, call: Callable[[aiormq.abc.AbstractChannel], Awaitable[T]]
    ) -> T:
        """`call` on the inspecting channel; once more on a new one if aiormq had closed it.

        aiormq closes a channel one of whose calls was cancelled, and refuses
        every call on it until the broker has answered the close, while the
        channel still says it is open. The connection is fine: that is a
        channel to replace, not an outage.
        """
        for last in (False, True):
            underlay = await (await self.inspecting()).get_underlay_channel()
            try:
                async with translated(what):
                    return await call(underlay)
            except BrokerUnavailable as exc:
                refused = isinstance(exc.__cause__, ax.ChannelInvalidStateError)
                if last or not refused or self._connection_lost():
                    raise
                log.info("the inspecting channel was closed under a cancelled call; reopened")
                self._inspecting = None
        raise AssertionError("unreachable: the second try returns or raises")

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        self._publishing = self._inspecting = None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()


async def shielded(call: Coroutine[Any, Any, T]) -> T:
    """Run `call` to its end even if its caller is cancelled meanwhile.

    aiormq closes a channel whose call was cancelled mid-way; a closed
    consuming channel hands every job on it out again, and a closed
    inspecting one refuses the next calls. The call runs as its own task:
    a cancelled caller stops waiting at once, the call finishes.
    """
    task = asyncio.ensure_future(call)
    task.add_done_callback(_retrieved)
    return await asyncio.shield(task)


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Read a shielded call's outcome, which a cancelled caller no longer will."""
    if not task.cancelled() and task.exception() is not None:
        log.debug("a call finished after its caller was cancelled: %s", task.exception())


async def _routed(connect: Callable[[], Awaitable[AbstractConnection]]) -> AbstractConnection:
    """`connect()`, tried again for up to `CONNECT_TIMEOUT` while the host has no route: the
    kernel says so for a while after a network comes back, before it finds the host again."""
    deadline = asyncio.get_running_loop().time() + CONNECT_TIMEOUT
    pause = 0.1
    while True:
        try:
            return await connect()
        except (OSError, ax.AMQPConnectionError) as exc:
            unrouted = getattr(exc, "errno", None) == errno.EHOSTUNREACH or (
                f"[Errno {errno.EHOSTUNREACH}]" in str(exc)
            )
            if not unrouted or asyncio.get_running_loop().time() + pause > deadline:
                raise
        await asyncio.sleep(pause)
        pause = min(1.0, pause * 2)


def _open(connection: AbstractConnection) -> bool:
    """Whether aio-pika's connection and aiormq's underneath it are both still open (the
    first learns of a lost socket after the second)."""
    if connection.is_closed:
        return False
    underlay = getattr(getattr(connection, "transport", None), "connection", None)
    return underlay is None or not getattr(underlay, "is_closed", False)


async def _close_quietly(connection: AbstractConnection) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CONNECT_TIMEOUT):
            await connection.close()


__all__ = ["AMQPClient", "Missing", "Unroutable", "shielded", "translated"]
