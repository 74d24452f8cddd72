# SPDX-License-Identifier: MIT
"""aiobotocore underneath: one client per queue, and the one place its errors are translated.

The client is made on first use and kept; it keeps its own pool of HTTP
connections (as many as a worker has receives, deletes and sends in
flight). botocore's own retries are off (one attempt per call): a send
retried by botocore after its answer was lost would be a second job on a
standard queue, so the worker's backoff does the retrying, and a push whose
answer never came is `OutcomeUnknown` rather than a silent second copy.

Every call goes through `call`, which counts it (`calls`, the figure that
prices a deployment: SQS bills per request) and turns botocore's exceptions
into the error tree: `BrokerUnavailable` for an endpoint that does not
answer, throttles or fails on its side; `OutcomeUnknown` for a write whose
answer was lost; `NotProvisioned` for a queue that does not exist;
`BrokerRejected` for a refusal (credentials, a bad parameter). The server's
clock comes back with every answer (its `Date`), and delays carried past
what SQS holds a message for are measured against it (receiving.py).

HTTPS is checked as on every driver (drivers/tls.py): a certificate that
fails its check, or an endpoint that answers HTTPS in plain HTTP, is
`TLSVerificationError`, a setting to fix, never an outage to wait out.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import ssl
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
import botocore.exceptions as bx
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.loaders import Loader, create_loader

from ...errors import (
    BrokerRejected,
    BrokerUnavailable,
    NotProvisioned,
    OutcomeUnknown,
    TLSVerificationError,
)
from .. import tls
from .settings import SQSSettings

log = logging.getLogger("rainier_queue.sqs")

MISSING = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})
"""The error codes of a queue that does not exist (the query and JSON protocols' names)."""
UNAVAILABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "RequestThrottled",
        "ServiceUnavailable",
        "InternalError",
        "InternalFailure",
        "KmsThrottled",
    }
)
POOL = 50
"""HTTP connections the client keeps: receives, deletes and sends of a busy worker at once."""


@functools.cache
def _models() -> Loader:
    """botocore's loader of service models, one a process, which keeps what it parsed."""
    return create_loader()


TLS_FIX = (
    "give the authority that signed the endpoint's certificate with `tls_ca=/path/ca.pem`, "
    "dial the endpoint by a name its certificate holds, or, knowing the risk, set "
    f"{tls.INSECURE}=true"
)
_PLAIN_SIGNS = ("wrong version number", "record layer failure", "packet length too long")
"""What OpenSSL says when the other side answered a TLS hello in plain text, lower case."""


def tls_failure(endpoint: str, exc: BaseException) -> TLSVerificationError | None:
    """The error for a failed TLS handshake with `endpoint` (`https://host:port`), or None
    when `exc` is no such failure."""
    host = endpoint.split("://", 1)[-1]
    if tls.is_verification_failure(exc):
        return tls.verification_failed("the SQS endpoint", host, exc, fix=TLS_FIX)
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current).lower()
        if isinstance(current, ssl.SSLError) and any(s in text for s in _PLAIN_SIGNS):
            return TLSVerificationError(
                f"the SQS endpoint at {host} does not speak TLS (HTTPS), which this URL asks "
                "for (an endpoint in the URL is HTTPS unless `tls=false`), so nothing was sent "
                "to it: serve HTTPS there, or add `tls=false` to send jobs and signed requests "
                "in the clear",
                host=host,
            )
        current = current.__cause__ or current.__context__
    return None


class QueueMissing(BrokerRejected):
    """The queue a call named does not exist (the caller, knowing which, says `NotProvisioned`)."""


def code_of(exc: bx.ClientError) -> str:
    error = exc.response.get("Error", {})
    return str(error.get("QueryErrorCode") or error.get("Code") or "")


@contextlib.contextmanager
def translated(what: str, *, write: bool = False, endpoint: str | None = None) -> Any:
    """Turn botocore's exceptions into this library's, naming what was being done.

    `write`: the call stores something (a send), so an answer lost after the
    request went out is `OutcomeUnknown`, not a plain outage. `endpoint`: an
    HTTPS endpoint, whose failed handshake is `TLSVerificationError`.
    """
    try:
        yield
    except Exception as exc:
        # Only a connection's failure is looked at: a refusal's text is the server's.
        refused = isinstance(exc, bx.ClientError)
        failure = tls_failure(endpoint, exc) if endpoint is not None and not refused else None
        if failure is not None:
            raise failure from exc
        with _translating(what, write=write):
            raise


@contextlib.contextmanager
def _translating(what: str, *, write: bool) -> Any:
    try:
        yield
    except bx.ClientError as exc:
        code = code_of(exc)
        if code in MISSING:
            raise QueueMissing(f"SQS: the queue to {what} does not exist ({code})") from exc
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 400)
        if code in UNAVAILABLE_CODES or int(status) >= 500:
            raise BrokerUnavailable(f"SQS could not {what} just now: {code} {exc}") from exc
        raise BrokerRejected(f"SQS refused to {what}: {code}: {_message(exc)}") from exc
    except bx.NoCredentialsError as exc:
        raise BrokerRejected(
            f"SQS: no credentials to {what} with: give `key` and `secret` (or the URL's user "
            "and password), or set up the ambient chain (AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, a profile, an instance role)"
        ) from exc
    except (bx.ConnectionError, aiohttp.ClientConnectorError) as exc:
        raise BrokerUnavailable(f"SQS is unreachable while trying to {what}: {exc}") from exc
    except (TimeoutError, bx.HTTPClientError, aiohttp.ClientError, OSError) as exc:
        if write:
            raise OutcomeUnknown(
                f"SQS did not answer while trying to {what} ({type(exc).__name__}), so its "
                "outcome is unknown: it may be stored (on a FIFO queue a push repeated within "
                "5 minutes is stored once; on a standard queue it would be a second copy)"
            ) from exc
        raise BrokerUnavailable(
            f"SQS is unreachable while trying to {what}: {type(exc).__name__} {exc}"
        ) from exc
    except bx.BotoCoreError as exc:
        raise BrokerRejected(f"SQS: could not {what}: {exc}") from exc


def _message(exc: bx.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Message") or exc)


def server_time(answer: Any) -> float | None:
    """The server's clock when it answered (its `Date`, to the second, so never ahead)."""
    date = answer.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if not date:
        return None
    try:
        return parsedate_to_datetime(str(date)).timestamp()
    except (TypeError, ValueError):
        return None


def not_provisioned(queue: str, name: str) -> NotProvisioned:
    return NotProvisioned(
        f"the SQS queue {name!r} (queue {queue!r}) does not exist, and this driver never makes "
        "one on a push, since a queue's type, visibility timeout and failed queue are "
        f"decisions: run `rainier-queue provision --queue {queue}`",
        queue=queue,
    )


class SQSConnection:
    """The aiobotocore client, made on first use and shared by the parts; counts every call."""

    def __init__(self, settings: SQSSettings) -> None:
        self.settings = settings
        self._client: Any = None
        self._context: Any = None
        self._connecting = asyncio.Lock()
        self.calls: collections.Counter[str] = collections.Counter()
        """Requests made, by operation: what SQS bills."""

    async def client(self) -> Any:
        if self._client is None:
            async with self._connecting:
                if self._client is None:
                    self._client = await self._connect()
        return self._client

    async def _connect(self) -> Any:
        s = self.settings
        timeout = s.timeout.total_seconds()
        config = AioConfig(
            retries={"total_max_attempts": 1},
            connect_timeout=min(timeout, 5.0),
            read_timeout=timeout + s.wait.total_seconds(),
            max_pool_connections=POOL,
        )
        args: dict[str, Any] = {"region_name": s.region, "config": config, "verify": s.verify}
        if s.endpoint is not None:
            args["endpoint_url"] = s.endpoint
        if s.insecure_skip_verify:
            tls.warn_unverified(f"SQS at {s.endpoint or 'AWS'}")
        if s.key is not None:
            args["aws_access_key_id"] = s.key
            args["aws_secret_access_key"] = s.secret
            if s.session_token is not None:
                args["aws_session_token"] = s.session_token
        session = get_session()
        # Each session would read and parse botocore's SQS model again (40-60 ms of CPU a
        # connection); the model files never change while the process runs, so one loader,
        # which keeps what it parsed, serves every session. Nothing else is shared:
        # credentials and their refresh stay with each connection's own session.
        session.register_component("data_loader", _models())
        context = session.create_client("sqs", **args)
        with translated("connect", endpoint=self._https):
            client = await context.__aenter__()
        self._context = context
        return client

    async def call(self, operation: str, what: str, *, write: bool = False, **args: Any) -> Any:
        """`operation` (`send_message`, ...) with `args`, counted and translated."""
        client = await self.client()
        self.calls[operation] += 1
        with translated(what, write=write, endpoint=self._https):
            return await getattr(client, operation)(**args)

    @property
    def _https(self) -> str | None:
        endpoint = self.settings.endpoint
        if endpoint is None:
            return f"https://sqs.{self.settings.region}.amazonaws.com"
        return endpoint if endpoint.startswith("https://") else None

    def transport_warnings(self) -> list[str]:
        """What `doctor` says of how jobs travel to the endpoint."""
        s = self.settings
        if s.endpoint is None:
            where, remote = f"SQS in {s.region}", True
        else:
            where = f"SQS at {s.endpoint}"
            remote = tls.is_remote(s.endpoint.split("://", 1)[1].rsplit(":", 1)[0])
        return tls.transport_warnings(
            where,
            encrypted=s.endpoint is None or s.endpoint.startswith("https://"),
            verified=not s.insecure_skip_verify,
            remote=remote,
            fix="drop `tls=false` and `insecure_skip_verify` to use HTTPS checked against "
            "the endpoint's authority (`tls_ca=/path/ca.pem` for one of your own)",
        )

    async def aclose(self) -> None:
        context, self._context, self._client = self._context, None, None
        if context is not None:
            with contextlib.suppress(Exception):
                await context.__aexit__(None, None, None)


__all__ = [
    "TLS_FIX",
    "QueueMissing",
    "SQSConnection",
    "code_of",
    "not_provisioned",
    "server_time",
    "translated",
]
