# SPDX-License-Identifier: MIT
"""The push path's own packer sends exactly the bytes redis-py's would, for every kind of argument.

Pushes are packed by `resp.pack` instead of redis-py's `pack_commands`
(cheaper); a difference in any byte would be a different command, so the
two are compared on the arguments a push, a raw push and a `WAIT` carry:
text (non-ASCII, surrogate-escaped, larger than redis-py's buffer cutoff),
bytes, whole numbers and floats.
"""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from rainier_queue.drivers.redis.resp import pack

COMMANDS: list[tuple[Any, ...]] = [
    ("EVALSHA", "0" * 40, 3, "rq:{default}:stream", "rq:{default}:delayed", "rq:{_}:wake", 1, 4),
    ("XADD", "rq:{caf%C3%A9}:stream", "*", "body", '{"text":"café ☕ 𝄞"}'),
    ("XADD", "s", "*", "body", "bytes \udcff kept as they were"),
    ("SET", b"raw\x00\xffkey", b"", -17, 0, 2**70),
    ("ZADD", "delayed", 1.5, "x" * 10_000),
    ("WAIT", 2, 1000),
    ("PING",),
]


@pytest.mark.parametrize("errors", ["strict", "surrogateescape"])
def test_the_same_bytes_as_redis_py(errors: str) -> None:
    conn = Connection(encoding_errors=errors)
    commands = COMMANDS if errors == "surrogateescape" else [COMMANDS[0], *COMMANDS[3:]]
    ours = pack(commands, conn.encoder.encoding, conn.encoder.encoding_errors)
    assert ours == b"".join(conn.pack_commands(commands))


def test_a_value_redis_cannot_take_is_refused_as_redis_py_refuses_it() -> None:
    for value in (True, None, object()):
        with pytest.raises(DataError):
            pack([("SET", "k", value)], "utf-8", "strict")
