# SPDX-License-Identifier: MIT
"""`SQSSettings`: one SQS connection's options, read once from its URL and table.

    sqs:///?region=eu-west-1&prefix=app-              AWS, credentials from the ambient chain
    sqs://KEY:SECRET@/?region=eu-west-1&prefix=app-   AWS, credentials in the URL
    sqs://KEY:SECRET@127.0.0.1:5000/?region=us-east-1&tls=false   another endpoint (moto, a proxy)
    sqs://KEY:SECRET@sqs.internal:443/?tls_ca=/etc/ssl/corp-ca.pem  HTTPS checked against a file

The host, when there is one, is the endpoint (HTTPS unless `tls=false`);
without one, botocore's regional endpoint is used. HTTPS certificates are
checked as on every driver (drivers/tls.py): against botocore's authorities,
or the file `tls_ca` names; `insecure_skip_verify=true` alone turns the
check off, and says so in the log and in `doctor`. Credentials come from
the URL's user and password, the `key` and `secret` options (a connection
table may write them as `${ENV}`), or, given neither, botocore's ambient
chain (environment, profile, instance role). None of it is ever shown:
`describe` names the endpoint, region and prefix alone.

`locks` names a shared lock store (its URL, URL-encoded in a query) that
batches are counted in, since SQS has no store of its own to count them in
(`drivers/lock_store_batches.py`); without it a batch is refused.

aiobotocore reads no query, so every key in it is this library's, and one
it does not take is refused with a "did you mean".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar, Self
from urllib.parse import parse_qsl, unquote, urlsplit

from ...errors import ConfigurationError
from ...queue import DEFAULT_LEASE
from ...redact import redact_url
from .. import tls
from ..options import DriverSettings, Options
from .names import check_prefix

OPTIONS = frozenset(
    {
        "prefix",
        "region",
        "key",
        "secret",
        "session_token",
        "tls",
        "tls_ca",
        tls.INSECURE,
        "fifo",
        "lease",
        "wait",
        "queue_urls",
        "max_message_size",
        "timeout",
        "locks",
    }
)
"""Every option the `sqs` driver takes, in the URL's query or the connection's table."""

MAX_VISIBILITY = timedelta(hours=12)
"""SQS's longest visibility timeout, and so the longest lease, and how long a message may be
held from its receipt in all (renewals included)."""
MAX_WAIT = timedelta(seconds=20)
"""SQS's longest long poll."""
MAX_DELAY = timedelta(seconds=900)
"""SQS's longest `DelaySeconds` on a message of a standard queue."""
DEFAULT_MAX_MESSAGE = 256 * 1024
"""The body size a push refuses beyond: SQS's limit for most of its life (since 2025 a
queue may take up to 1 MiB, asked for with `max_message_size`)."""
LARGEST_MESSAGE = 1024 * 1024
DEFAULT_REGION = "us-east-1"
DEFAULT_TIMEOUT = timedelta(seconds=30)
"""How long a call (other than a long poll, which adds its wait) waits for SQS's answer."""
DEDUPLICATION_WINDOW = timedelta(minutes=5)
"""How long a FIFO queue drops a message sent again under a deduplication id it has had,
whether or not the first was received and deleted since (SQS's deduplication interval)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SQSSettings(DriverSettings):
    """Which endpoint, as whom, and the shape provisioning gives each queue."""

    endpoint: str | None
    """`http(s)://host:port`, or None for botocore's regional endpoint."""
    region: str = DEFAULT_REGION
    prefix: str = ""
    fifo: bool = False
    """Every queue of the connection is a FIFO queue (`.fifo`): each job its own message
    group, its id the deduplication id, so a push repeated within 5 minutes is one job."""
    lease: timedelta = DEFAULT_LEASE
    """The visibility timeout each receive asks for (whole seconds, rounded up)."""
    wait: timedelta = MAX_WAIT
    """The longest long poll an idle worker makes (`WaitTimeSeconds`), at most 20 s; a
    stopping worker waits for the one under way, so a shorter wait stops sooner."""
    queue_urls: Mapping[str, str] = field(default_factory=dict)
    max_message_size: int = DEFAULT_MAX_MESSAGE
    timeout: timedelta = DEFAULT_TIMEOUT
    tls_ca: str | None = None
    """The file of authorities an HTTPS endpoint's certificate is checked against (None:
    botocore's own)."""
    insecure_skip_verify: bool = False
    key: str | None = field(default=None, repr=False)
    secret: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    locks: str = field(default="", repr=False)
    """The URL of the lock store batches are counted in (`drivers/lock_store_batches.py`);
    empty: none, and a batch is refused."""

    OPTIONS: ClassVar[frozenset[str]] = OPTIONS

    @classmethod
    def query_of(cls, url: str, known: frozenset[str], who: str) -> Mapping[str, str]:
        if urlsplit(url).scheme.lower() != "sqs":
            raise ConfigurationError(f"the sqs driver takes an `sqs://` URL, not {redact_url(url)}")
        return dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))

    @classmethod
    def build(cls, url: str, options: Options) -> Self:
        parts = urlsplit(url)
        key = unquote(parts.username) if parts.username else options.get("key") or None
        secret = (
            unquote(parts.password) if parts.password is not None else options.get("secret") or None
        )
        if (key is None) != (secret is None):
            raise ConfigurationError(
                "an sqs connection names both an access key and its secret (the URL's user and "
                "password, or `key` and `secret`), or neither, to use the ambient credential "
                "chain (environment, profile, instance role); it has only one of them"
            )
        host = parts.hostname
        endpoint = None
        want_tls = True
        if host:
            want_tls = options.flag("tls", True)
            scheme = "https" if want_tls else "http"
            port = f":{parts.port}" if parts.port else ""
            shown = f"[{host}]" if ":" in host else host
            endpoint = f"{scheme}://{shown}{port}"
        elif "tls" in options:
            raise ConfigurationError(
                "`tls` chooses how to reach an endpoint the URL names (sqs://host:port/); "
                "AWS's own endpoints are always HTTPS: drop `tls`, or name the endpoint"
            )
        authority = options.get("tls_ca") or None
        if authority is not None and not want_tls:
            raise ConfigurationError(
                "tls=false, but `tls_ca` names an authority to check the endpoint's HTTPS "
                "certificate with: drop `tls=false` to use HTTPS, or drop `tls_ca`"
            )
        skip = tls.insecure(options.get(tls.INSECURE), where="the `sqs` driver")
        if skip and not want_tls:
            raise ConfigurationError(
                f"{tls.INSECURE}=true, but this URL reaches its endpoint over plain HTTP "
                "(tls=false), so there is no certificate to skip checking: drop one of them"
            )
        lease = options.lease(DEFAULT_LEASE)
        if lease > MAX_VISIBILITY:
            raise ConfigurationError(
                f"an SQS lease is a visibility timeout, at most 12 hours; {lease} is longer: "
                "keep the lease short and let the worker renew it while a job runs"
            )
        wait = options.duration("wait", MAX_WAIT)
        if wait > MAX_WAIT:
            raise ConfigurationError(
                f"`wait` is SQS's long poll (`WaitTimeSeconds`), at most 20s; {wait} is longer"
            )
        size = options.count("max_message_size", DEFAULT_MAX_MESSAGE, minimum=1024)
        if size > LARGEST_MESSAGE:
            raise ConfigurationError(
                f"`max_message_size` is at most {LARGEST_MESSAGE} bytes (SQS's limit), not {size}"
            )
        return cls(
            endpoint=endpoint,
            region=options.text("region", DEFAULT_REGION),
            prefix=options.prefix("prefix", "", check_prefix),
            fifo=options.flag("fifo", False),
            lease=lease,
            wait=wait,
            queue_urls=read_urls(options.get("queue_urls")),
            max_message_size=size,
            timeout=options.positive_duration("timeout", DEFAULT_TIMEOUT),
            tls_ca=authority,
            insecure_skip_verify=skip,
            key=key,
            secret=secret,
            session_token=options.get("session_token") or None,
            locks=options.text("locks", ""),
        )

    @property
    def verify(self) -> str | bool:
        """botocore's `verify`: the authorities' file, False for no check, True for its own."""
        if self.insecure_skip_verify:
            return False
        return self.tls_ca if self.tls_ca is not None else True

    def describe(self) -> str:
        where = self.endpoint or "AWS"
        kind = " fifo" if self.fifo else ""
        return f"sqs {where} region={self.region} prefix={self.prefix!r}{kind}"

    def __repr__(self) -> str:  # credentials must not show, even in a debugger
        return f"SQSSettings({self.describe()})"


def read_urls(value: Any) -> dict[str, str]:
    """`queue_urls`: a table of queue name -> SQS queue URL, or `name=url,name=url`."""
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping):
        pairs = [(str(k), str(v)) for k, v in value.items()]
    else:
        pairs = []
        for item in str(value).split(","):
            name, eq, url = item.partition("=")
            if not eq:
                raise ConfigurationError(
                    f"`queue_urls` maps queue names to SQS queue URLs as name=url,name=url "
                    f"(or a table); cannot read {item!r}"
                )
            pairs.append((name.strip(), url.strip()))
    for name, url in pairs:
        if not url.startswith(("https://", "http://")):
            raise ConfigurationError(
                f"`queue_urls` gives queue {name!r} the URL {url!r}, which is not an SQS queue "
                "URL (https://sqs.<region>.amazonaws.com/<account>/<name>)"
            )
    return dict(pairs)


__all__ = [
    "DEDUPLICATION_WINDOW",
    "DEFAULT_MAX_MESSAGE",
    "MAX_DELAY",
    "MAX_VISIBILITY",
    "MAX_WAIT",
    "OPTIONS",
    "SQSSettings",
]
