# SPDX-License-Identifier: MIT
"""Options in a URL's query string, for drivers whose URL names no server.

The README promises that driver options may go in the URL's query string
(`memory://?lease=5s`) as well as in the connection's table. A driver
whose client library does not read the query itself reads it here, so a
query option is honoured, and a misspelt one is refused with a "did you
mean", exactly as the same key in the table would be.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit

from ..errors import UnknownOption


def url_options(url: str, known: Iterable[str], where: str) -> dict[str, str]:
    """The query options of `url`, each checked against `known`."""
    allowed = frozenset(known)
    options = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    for key in options:
        if key not in allowed:
            raise UnknownOption(f"{where} (in the URL's query)", key, allowed)
    return options


__all__ = ["url_options"]
