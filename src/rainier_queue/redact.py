# SPDX-License-Identifier: MIT
"""Keep credentials out of logs, reprs and error messages.

A connection URL often carries a password (`postgresql://app:secret@db/app`)
or a token in its query string. Anything this library prints about a
connection goes through `redact_url` first.
"""

from __future__ import annotations

from urllib.parse import urlsplit

REDACTED = "***"


def redact_url(url: str) -> str:
    """`url` with any password and query string replaced by `***`."""
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
    query = f"?{REDACTED}" if parts.query else ""
    # Built by hand: urlunsplit drops the `//` of a URL with no host, which
    # turns `sqlite:////tmp/x.db` into something that reads as host `tmp`.
    return f"{parts.scheme}://{netloc}{parts.path}{query}"
