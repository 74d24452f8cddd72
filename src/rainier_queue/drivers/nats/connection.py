# SPDX-License-Identifier: MIT
"""nats-py underneath: one client per queue, and the one place its errors are translated.

The client connects on first use. The first connection is tried once, so a
wrong address or a certificate that fails its check is an error at once
rather than a loop; once connected, the client reconnects for ever on its
own (every two seconds), buffering what is published meanwhile, and the
subscriptions come back with it. A call made during an outage waits for its
answer up to its timeout and is then `BrokerUnavailable` (a pull request out
when the connection drops is that at once: see fetching.py); a push whose
acknowledgement never came is `OutcomeUnknown`, since the server may have
stored it (a repeat within the duplicate window is dropped by its job id).

Every call that reaches the server goes through `translated()`, so the
worker sees `BrokerUnavailable` (wait and retry), `BrokerRejected` (a
refusal) or `TLSVerificationError`, never a nats-py class.

TLS (`tls=true`) is checked as on every driver (drivers/tls.py), with one
addition nats-py lacks: in the NATS protocol the server speaks first, in the
clear, and says in its INFO whether it wants TLS; nats-py upgrades only when
the server asks, so given a TLS context and a server that speaks none (or a
man in the middle who strips the request), it carries on in the clear and
sends the credentials that way. `_TLSClient` refuses such a server after its
INFO and before the CONNECT, on every connection and reconnection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import nats.errors as nx
import nats.js.errors as jx
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import PubAck

from ...errors import BrokerRejected, BrokerUnavailable, OutcomeUnknown, TLSVerificationError
from .. import tls
from .settings import NATSSettings

log = logging.getLogger("rainier_queue.nats")

CONNECT_TIMEOUT = 3.0
RECONNECT_WAIT = 2.0
API_TIMEOUT = 5.0
"""Seconds a JetStream API call (stream or consumer info, a message read) waits."""
TLS_FIX = (
    "give the authority that signed the server's certificate with `tls_ca=/path/ca.pem`, "
    "connect by the name the certificate holds, or, to accept any certificate knowingly, add "
    f"{tls.INSECURE}=true"
)

_UNAVAILABLE: tuple[type[BaseException], ...] = (
    nx.TimeoutError,
    nx.NoServersError,
    nx.ConnectionClosedError,
    nx.StaleConnectionError,
    nx.OutboundBufferLimitError,
    nx.ConnectionReconnectingError,
    nx.NoRespondersError,
    jx.ServiceUnavailableError,
    jx.NoStreamResponseError,
    asyncio.TimeoutError,
    ConnectionError,
)


class ServerWithoutTLS(nx.Error):
    """A server that did not ask for TLS, met by a client that was to use it."""

    def __init__(self, host: str) -> None:
        super().__init__(f"nats: the server at {host} does not speak TLS")
        self.host = host


def without_tls(host: str) -> TLSVerificationError:
    """The error for a server that does not speak the TLS its URL asks for."""
    return TLSVerificationError(
        f"the NATS server at {host} does not speak TLS, which this URL asks for (`tls=true`), "
        "so nothing was sent to it: turn TLS on in the server (`tls { cert_file, "
        "key_file }` or `--tls --tlscert --tlskey`), or drop `tls`, `tls_ca` and "
        f"`{tls.INSECURE}` from the URL to connect in the clear",
        host=host,
    )


@contextlib.asynccontextmanager
async def translated(what: str, *, host: str = "the NATS server") -> AsyncIterator[None]:
    """Turn nats-py's exceptions into this library's, naming what was being done."""
    try:
        yield
    except jx.NotFoundError:
        raise  # the driver handles this one itself: a message or consumer that is not there
    except ServerWithoutTLS as exc:
        raise without_tls(exc.host) from exc
    except ssl.SSLError as exc:
        if tls.is_verification_failure(exc):
            raise tls.verification_failed("the NATS server", host, exc, fix=TLS_FIX) from exc
        raise BrokerUnavailable(f"NATS TLS failed while trying to {what}: {exc}") from exc
    except _UNAVAILABLE as exc:
        raise BrokerUnavailable(
            f"NATS is unreachable while trying to {what}: {type(exc).__name__} {exc}"
        ) from exc
    except (jx.APIError, nx.Error) as exc:
        raise BrokerRejected(f"NATS refused to {what}: {exc}") from exc
    except OSError as exc:
        if tls.is_verification_failure(exc):
            raise tls.verification_failed("the NATS server", host, exc, fix=TLS_FIX) from exc
        raise BrokerUnavailable(f"NATS is unreachable while trying to {what}: {exc}") from exc


class _Client(Client):
    """nats-py's client, with two things it lacks: it will not talk in the clear to a server
    when TLS was asked for (the module says why), and a failed first connection can let go of
    its socket (nats-py leaves it to the garbage collector, and `close` would wait on it for
    ever after a failed TLS handshake)."""

    def __init__(self, *, require_tls: bool) -> None:
        super().__init__()
        self._require_tls = require_tls

    async def _process_info(self, info: dict[str, Any], initial_connection: bool = False) -> None:
        if self._require_tls and initial_connection and not info.get("tls_required", False):
            server = self._current_server
            self.abandon()  # before CONNECT: nothing was sent, and nothing will be
            raise ServerWithoutTLS(server.uri.netloc if server is not None else "the server")
        await super()._process_info(info, initial_connection)

    def abandon(self) -> None:
        """Close the socket of a connection that failed, without waiting on it."""
        transport = self._transport
        if transport is not None:
            transport.close()  # type: ignore[no-untyped-call]


class NATSConnection:
    """The client and its JetStream context, made on first use and shared by the parts."""

    def __init__(self, settings: NATSSettings) -> None:
        self.settings = settings
        self._client: Client | None = None
        self._js: JetStreamContext | None = None
        self._connecting = asyncio.Lock()
        self._closing = False
        self.drops = 0
        """How often the connection has dropped. The server forgets a pull request whose
        connection drops, so a request sent before a drop will never be answered."""
        self._woken_on_drop: set[Callable[[], None]] = set()

    async def _disconnected(self) -> None:
        if not self._closing:  # closing disconnects too, and that is no news
            self.drops += 1
            log.warning("lost the connection to NATS; reconnecting")
            for wake in list(self._woken_on_drop):
                wake()

    def wake_on_drop(self, wake: Callable[[], None], *, stop: bool = False) -> None:
        """Call `wake` whenever the connection drops (no more once asked to `stop`)."""
        if stop:
            self._woken_on_drop.discard(wake)
        else:
            self._woken_on_drop.add(wake)

    def require_unbroken(self, since: int, what: str) -> None:
        """`BrokerUnavailable` if the connection dropped after `drops` read `since`: a request
        sent in between was lost, and its answer would never come (the client reconnects, and
        waiting on would pass the outage by as an empty queue)."""
        if self.drops != since:
            raise BrokerUnavailable(
                f"NATS is unreachable while trying to {what}: the connection dropped while "
                "the request was out"
            )

    async def client(self) -> Client:
        if self._client is None or self._client.is_closed:
            async with self._connecting:
                if self._client is None or self._client.is_closed:
                    self._client = await self._connect()
                    self._js = self._client.jetstream(timeout=API_TIMEOUT)
        return self._client

    async def jetstream(self) -> JetStreamContext:
        await self.client()
        assert self._js is not None
        return self._js

    def require_connected(self, what: str) -> None:
        """`BrokerUnavailable` while the client is reconnecting (it buffers, and would wait)."""
        if self._client is not None and not self._client.is_connected:
            raise BrokerUnavailable(
                f"NATS is unreachable while trying to {what}: the client is reconnecting"
            )

    async def _connect(self) -> Client:
        s = self.settings
        args: dict[str, Any] = {
            "servers": list(s.servers),
            "name": "rainier-queue",
            "connect_timeout": CONNECT_TIMEOUT,
            "allow_reconnect": False,  # the first connection is tried once (see the docstring)
            "max_reconnect_attempts": 1,
            "reconnect_time_wait": RECONNECT_WAIT,
            "error_cb": _quiet,
            "disconnected_cb": self._disconnected,
            "reconnected_cb": _reconnected,
        }
        if s.user is not None:
            args["user"], args["password"] = s.user, s.password or ""
        if s.token is not None:
            args["token"] = s.token
        if s.nkey is not None:
            args["nkeys_seed"] = s.nkey
        if s.creds is not None:
            args["user_credentials"] = s.creds
        if s.tls:
            args["tls"] = self._tls_context()
        host = s.servers[0].split("://", 1)[-1]
        client = _Client(require_tls=s.tls)
        async with translated("connect", host=host):
            try:
                await client.connect(**args)
            except nx.NoServersError as exc:
                client.abandon()
                cause = client.last_error
                if isinstance(cause, ssl.SSLError | OSError | ServerWithoutTLS):
                    raise cause from exc
                raise
            except BaseException:
                client.abandon()
                raise
        client.options["allow_reconnect"] = True
        client.options["max_reconnect_attempts"] = -1
        return client

    def _tls_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.settings.tls_ca)
        if self.settings.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            tls.warn_unverified(", ".join(self.settings.servers))
        return context

    def transport_warnings(self) -> list[str]:
        """What `doctor` says of how jobs travel: in the clear to another machine, or unchecked."""
        s = self.settings
        hosts = [server.split("://", 1)[-1].rpartition(":")[0] for server in s.servers]
        return tls.transport_warnings(
            f"NATS at {', '.join(s.servers)}",
            encrypted=s.tls,
            verified=not s.insecure_skip_verify,
            remote=any(tls.is_remote(host) for host in hosts),
            fix="serve TLS (nats-server `--tls --tlscert --tlskey`) and add `tls=true` to the "
            "URL, with `tls_ca=` if your own authority signed the server's certificate",
        )

    async def publish(self, subject: str, body: bytes, headers: dict[str, str]) -> PubAck:
        """Store one message and wait for the server to say so (else `OutcomeUnknown`)."""
        js = await self.jetstream()
        try:
            return await js.publish(
                subject,
                body,
                timeout=self.settings.publish_timeout.total_seconds(),
                headers=headers,
            )
        except (TimeoutError, nx.TimeoutError, nx.ConnectionClosedError) as exc:
            raise OutcomeUnknown(
                f"NATS did not acknowledge the message to {subject!r} in time, so its outcome "
                "is unknown: it may be stored (a push repeated within the duplicate window is "
                "stored once)"
            ) from exc
        except Exception as exc:
            async with translated(f"publish to {subject!r}"):
                raise exc

    async def purge(self, stream: str, subject: str) -> int:
        """Delete every message of `stream` on `subject` (wildcards allowed); how many went."""
        client = await self.client()
        async with translated(f"purge {subject!r} from stream {stream!r}"):
            answer = await client.request(
                f"$JS.API.STREAM.PURGE.{stream}",
                json.dumps({"filter": subject}).encode(),
                timeout=API_TIMEOUT,
            )
            data = json.loads(answer.data)
            if "error" in data:
                if data["error"].get("code") == 404:
                    return 0
                raise jx.APIError.from_error(data["error"])
        return int(data.get("purged", 0))

    async def aclose(self) -> None:
        client, self._client, self._js = self._client, None, None
        self._closing = True
        if client is not None and not client.is_closed:
            with contextlib.suppress(Exception):
                await client.close()


async def _quiet(exc: Exception) -> None:
    log.debug("nats client: %s: %s", type(exc).__name__, exc)


async def _reconnected() -> None:
    log.info("reconnected to NATS")


__all__ = ["NATSConnection", "ServerWithoutTLS", "translated", "without_tls"]
