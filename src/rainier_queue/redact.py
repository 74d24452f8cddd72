# SPDX-License-Identifier: MIT
"""Keep credentials out of logs, reprs and error messages.

A connection URL often carries a password (`postgresql://app:secret@db/app`)
or a token in its query string. Anything this library prints about a
connection goes through `redact_url` first.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

REDACTED = "***"

_SECRET_KEY = re.compile(r"pass|pwd|secret|token|key|auth|cred|sig|session", re.IGNORECASE)
"""Query keys whose value is hidden: passwords, tokens, keys, signatures and the like."""


def redact_url(url: str) -> str:
    """`url` with any password, and the value of any secret-looking query option, as `***`.

    The other options stay readable (`?prefix=app_&lease=90s`): a person
    comparing two workers' connections needs them, and they hold no secret.
    An option whose value is itself a URL is shown redacted the same way.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    if not parts.scheme:
        return REDACTED if ("@" in url or "?" in url) else url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{REDACTED}@{host}" if ":" in userinfo else f"{REDACTED}@{host}"
    query = f"?{_redacted_query(parts.query)}" if parts.query else ""
    # Built by hand: urlunsplit drops the `//` of a URL with no host, which
    # turns `sqlite:////tmp/x.db` into something that reads as host `tmp`.
    return f"{parts.scheme}://{netloc}{parts.path}{query}"


def _redacted_query(query: str) -> str:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        return REDACTED
    return "&".join(f"{key}={_redacted_value(key, value)}" for key, value in pairs)


def _redacted_value(key: str, value: str) -> str:
    """A query option's value as it may be shown: hidden if its key sounds secret, and a URL
    inside it (Kafka's `locks=redis://:pw@cache`) redacted in its turn."""
    if _SECRET_KEY.search(key):
        return REDACTED
    if "://" in value:
        return redact_url(value)
    return REDACTED if "@" in value else value


def redact_fields(data: object) -> object:
    """A copy of `data` (a job's payload, as JSON data) safe to show to a person.

    The value under any key that sounds secret (the names `redact_url` hides in a
    query: password, token, key, secret, ...) is `***`, at any depth, and a string
    that is a URL with credentials is shown as `redact_url` shows it. The rest is
    kept as it is: an operator reading a failed job needs its arguments, not its
    secrets. Used by the dashboard, which shows payloads to whoever may open it.
    """
    if isinstance(data, dict):
        return {
            key: REDACTED
            if isinstance(key, str) and _SECRET_KEY.search(key)
            else redact_fields(value)
            for key, value in data.items()
        }
    if isinstance(data, list | tuple):
        return [redact_fields(item) for item in data]
    if isinstance(data, str) and "://" in data and ("@" in data or "?" in data):
        return redact_url(data)
    return data
