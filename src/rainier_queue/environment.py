# SPDX-License-Identifier: MIT
"""A connection's URL from the variable its platform already sets (`REDIS_URL`, `KAFKA_BROKERS`,
`SQS_QUEUE_URL`).

Why: hosting platforms and container setups hand a service's address to
the application in a variable of a well-known name, and the upstream booted
its queues from those. A connection table that names its `driver` and
leaves its `url` out takes the URL from that driver's variable, so the
file says *what* the connection is and the environment says *where*:

```toml
[tool.rainier-queue.connections.hot]
driver = "redis"            # the URL comes from REDIS_URL
prefix = "app:"
```

Only where the table leaves `url` out: a table that writes its `url` never
reads the variable, so a `REDIS_URL` set for another purpose (a cache)
cannot move a queue. The variables are read from the mapping the caller
hands over (`QueueConfig.load(environ=os.environ)`; the CLI hands over its
own), never from the process: the library reads no environment itself.

`ENVIRONMENT_URLS` is one line per driver scheme: the variable, and how its
value becomes that driver's URL. A driver that adds one adds its line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from .errors import ConfigurationError
from .redact import redact_url


@dataclass(frozen=True, slots=True)
class EnvironmentURL:
    """Where one driver's URL is found in the environment."""

    variable: str
    """The variable's name, such as `REDIS_URL`."""
    url: Callable[[str, str], str]
    """The driver's URL from the variable's value (and the variable's name, for errors)."""


def _redis(value: str, variable: str) -> str:
    """`REDIS_URL`: one URL, or several comma-separated, which are a cluster's seeds."""
    seeds = [seed.strip() for seed in value.split(",") if seed.strip()]
    if not seeds:
        raise ConfigurationError("it is set but names no Redis server")
    if len(seeds) == 1:
        return seeds[0]
    netlocs = []
    for seed in seeds:
        parts = urlsplit(seed if "://" in seed else f"redis://{seed}")
        if parts.scheme != "redis":
            raise ConfigurationError(
                f"{variable} lists several seeds ({redact_url(seed)} among them), which make "
                "a cluster, and a cluster's seeds are written `redis://host:port` or "
                "`host:port`; for a cluster over TLS set one URL, "
                "`rediss://host:port/?cluster=true`"
            )
        netlocs.append(parts.netloc)
    return f"redis-cluster://{','.join(netlocs)}"


def _kafka(value: str, variable: str) -> str:
    """`KAFKA_BROKERS`: `host:port` entries, comma-separated, blanks dropped."""
    brokers = [broker.strip() for broker in value.split(",") if broker.strip()]
    if not brokers:
        raise ConfigurationError(
            "it is set but names no broker; write `host:port`, comma-separated"
        )
    return f"kafka://{','.join(brokers)}"


_AWS_SQS_HOST = re.compile(r"sqs\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?")


def _sqs(value: str, variable: str) -> str:
    """`SQS_QUEUE_URL`: one queue's URL, which becomes the connection's `default` queue.

    On AWS the region is read from the host and botocore's regional endpoint
    is used; another host (a local emulator) becomes the endpoint. Other
    queues are named by the connection's `prefix`, as always; credentials
    come from the ambient AWS chain unless the table gives them.
    """
    url = value.strip()
    parts = urlsplit(url)
    account_and_name = [p for p in parts.path.split("/") if p]
    if parts.scheme not in ("https", "http") or not parts.hostname or len(account_and_name) != 2:
        raise ConfigurationError(
            "it is not an SQS queue URL; write https://sqs.<region>.amazonaws.com/<account>/<queue>"
        )
    query = {"queue_urls": f"default={url}"}
    aws = _AWS_SQS_HOST.fullmatch(parts.hostname)
    if aws is not None:
        query["region"] = aws.group(1)
        netloc = ""
    else:
        netloc = parts.netloc
        if parts.scheme == "http":
            query["tls"] = "false"
    if account_and_name[1].endswith(".fifo"):
        query["fifo"] = "true"
    return f"sqs://{netloc}/?{urlencode(query)}"


ENVIRONMENT_URLS: dict[str, EnvironmentURL] = {
    "redis": EnvironmentURL("REDIS_URL", _redis),
    "kafka": EnvironmentURL("KAFKA_BROKERS", _kafka),
    "sqs": EnvironmentURL("SQS_QUEUE_URL", _sqs),
}
"""Driver scheme -> the variable a connection without a `url` reads, one line a driver."""


def url_from_environment(
    driver: str, environ: Mapping[str, str] | None, *, where: str
) -> tuple[str | None, str | None]:
    """The URL of a connection with `driver = ...` and no `url`: (url, None), or (None, why not).

    "Why not" names the variable that is not set, or says what is wrong with
    its value: the connection is refused when it is used, as one whose
    `${NAME}` is missing is. A driver with no variable of its own is refused
    now, since no environment could help it.
    """
    found = ENVIRONMENT_URLS.get(driver)
    if found is None:
        known = ", ".join(f"`{name}` ({e.variable})" for name, e in ENVIRONMENT_URLS.items())
        raise ConfigurationError(
            f"{where} needs a `url`: the `{driver}` driver has no environment variable to "
            f"take it from (the drivers that do: {known})"
        )
    if environ is None:
        return None, (
            f"{where} leaves its `url` out, so it comes from {found.variable}, and no "
            "environment was handed over to read it from: pass it, "
            "QueueConfig.load(..., environ=os.environ)"
        )
    value = environ.get(found.variable, "")
    if not value.strip():
        return None, (
            f"{where} leaves its `url` out, so it comes from {found.variable}, which is not "
            f"set: set {found.variable}, or write the connection's `url`"
        )
    try:
        return found.url(value, found.variable), None
    except ConfigurationError as exc:
        return None, f"{where} takes its `url` from {found.variable}, and {exc}"


__all__ = ["ENVIRONMENT_URLS", "EnvironmentURL", "url_from_environment"]
