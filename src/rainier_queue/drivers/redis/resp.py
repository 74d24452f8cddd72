# SPDX-License-Identifier: MIT
"""Pushes packed into Redis's wire format here, because redis-py's packer cost more than the rest.

Every push sends one `EVALSHA` of about ten arguments on a connection it
holds (`replication.py`). redis-py's asyncio `pack_commands` runs each
argument through its encoder and joins the buffer again for each one,
which made it the largest single item of a push's client CPU, more than
the JSON of the job. The format itself is small: `*<n>` and then
`$<length>` and the bytes for each argument, CRLF after each. Packing it
in one pass with the connection's own encoding (and encoding errors, so a
body is encoded exactly as redis-py would) gives the same bytes for less.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.exceptions import DataError


def pack(commands: Sequence[Sequence[Any]], encoding: str, errors: str) -> bytes:
    """`commands` as RESP arrays of bulk strings, back to back, ready to send."""
    out: list[bytes] = []
    for command in commands:
        out.append(b"*%d\r\n" % len(command))
        for arg in command:
            kind = type(arg)
            if kind is str:
                data = arg.encode(encoding, errors)
            elif kind is int:
                data = b"%d" % arg
            else:
                data = _other(arg, encoding, errors)
            out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)


def _other(arg: Any, encoding: str, errors: str) -> bytes:
    """An argument that is not exactly `str` or `int`, encoded as redis-py's encoder would."""
    if isinstance(arg, bytes):
        return arg
    if isinstance(arg, bool):
        raise DataError(f"cannot send a bool to Redis: {arg!r}")
    if isinstance(arg, int | float):
        return repr(arg).encode()
    if isinstance(arg, str):
        return arg.encode(encoding, errors)
    raise DataError(f"cannot send {type(arg).__name__} to Redis: {arg!r}")


__all__ = ["pack"]
