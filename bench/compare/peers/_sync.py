# SPDX-License-Identifier: MIT
"""Helpers for the synchronous peers (Huey, Dramatiq, Celery, RQ): the counter, key cleanup.

The counter is the benchmark's instrument (see `_async.py`, its asyncio
twin): one INCR per job, as cheap as Python makes it, so that it weighs
the same in every system. Here that is a plain socket per thread (the
peers run jobs in threads or forked processes), one `sendall` and one
`recv` per INCR, about half of what redis-py's blocking client costs.

In the I/O-bound workload each job first blocks in `time.sleep` for the
run's wait (a call to a slow service, as the asyncio jobs await it): a
thread worker lets the others run meanwhile, a process worker waits.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from urllib.parse import urlsplit

from ._common import REDIS_URL, SLEEP_ENV, counter_key

_local = threading.local()
_SLEEP_S = float(os.environ.get(SLEEP_ENV) or 0) / 1000
"""The I/O-bound workload's wait per job, before the INCR (0: none)."""


def _connect() -> socket.socket:
    url = urlsplit(REDIS_URL)
    conn = socket.create_connection((url.hostname or "127.0.0.1", url.port or 6379))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    database = (url.path or "/0").strip("/") or "0"
    if database != "0":
        conn.sendall(b"*2\r\n$6\r\nSELECT\r\n$%d\r\n%s\r\n" % (len(database), database.encode()))
        _reply(conn)
    return conn


def _reply(conn: socket.socket) -> bytes:
    line = b""
    while not line.endswith(b"\r\n"):
        chunk = conn.recv(64)
        if not chunk:
            raise ConnectionError("the counter's Redis connection closed")
        line += chunk
    if line[:1] not in (b":", b"+"):
        raise RuntimeError(f"redis said {line.decode(errors='replace').strip()}")
    return line


def incr_counter() -> None:
    """INCR the run's counter on this thread's connection (a fork gets a new one).

    In the I/O-bound workload, after blocking for its wait."""
    if _SLEEP_S:
        time.sleep(_SLEEP_S)
    if getattr(_local, "pid", None) != os.getpid():
        key = counter_key().encode()
        _local.conn = _connect()
        _local.command = b"*2\r\n$4\r\nINCR\r\n$%d\r\n%s\r\n" % (len(key), key)
        _local.pid = os.getpid()
    _local.conn.sendall(_local.command)
    _reply(_local.conn)


def close_counter() -> None:
    """Close this thread's counter connection, if it has one (tests; a worker just exits)."""
    conn = getattr(_local, "conn", None)
    if conn is not None:
        conn.close()
    _local.conn = _local.pid = None


def delete_matching(pattern: str) -> None:
    import redis  # here: a worker imports this module for its counter, and never calls this

    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=pattern, count=1000))
        for i in range(0, len(keys), 1000):
            client.delete(*keys[i : i + 1000])
    finally:
        client.close()
