# SPDX-License-Identifier: MIT
"""`RedisCache`: the cache and lock store on Redis, shared by every process that reaches it.

Locks for unique jobs and the scheduler's "on one server" want a store
every worker sees, with atomic set-if-absent and compare-and-delete; Redis
has both natively (`SET NX PX`) or through a short Lua script. What
choosing it costs is what the Redis queue driver costs: writes are
acknowledged before they reach disk and replication is asynchronous, so a
lock can vanish in a crash or failover (and a second holder take it). For
uniqueness locks and cron de-duplication that is usually acceptable; they
are leases, not mutexes, on every store.

Every key is `prefix + key` (option `prefix` in the URL's query string,
default `rq:cache:`), and `flush` deletes only keys under that prefix
(SCAN, then DEL), never the whole database.

    redis://127.0.0.1:6379/0?prefix=myapp:cache:
    redis-cluster://10.0.0.1:7000,10.0.0.2:7000?prefix=myapp:cache:
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from datetime import timedelta
from typing import Any, Self, cast

from redis import exceptions as rx
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript
from typing_extensions import override

from ..drivers.redis.connection import Client, Ready, translated
from ..drivers.redis.settings import RedisSettings
from ..locks import Cache

DEFAULT_PREFIX = "rq:cache:"

_REPLACE_IF = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(ARGV[3]) > 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
return 1
"""

_FORGET_IF = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
"""

_INCREMENT = """
-- ARGV: by, ttl_ms (0: none). Expiry is set only when the counter is created.
local current = redis.call('GET', KEYS[1])
if not current then
  if tonumber(ARGV[2]) > 0 then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  else
    redis.call('SET', KEYS[1], ARGV[1])
  end
  return tonumber(ARGV[1])
end
if current == '' then
  redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
  return tonumber(ARGV[1])
end
local ok, value = pcall(redis.call, 'INCRBY', KEYS[1], ARGV[1])
if not ok then return redis.error_reply('NOTINT the value is not a whole number') end
return value
"""


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


def _ms(ttl: timedelta | None) -> int:
    return 0 if ttl is None else max(1, int(ttl.total_seconds() * 1000))


class RedisCache(Cache):
    """Keys under one prefix on a Redis (or Redis cluster)."""

    name = "redis"

    @classmethod
    def from_url(cls, url: str) -> Self:
        """`redis://host:port/db?prefix=...`; or `rediss://`, `unix:///path`, `redis-cluster://`."""
        settings, _ = RedisSettings.read(url, who="the redis cache")
        prefix = DEFAULT_PREFIX if settings.prefix is None else settings.prefix
        return cls(settings.client(decode=False), prefix=prefix)

    def __init__(self, client: Client, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._client = client
        self._ready = Ready(client)
        self._cluster = isinstance(client, RedisCluster)
        self.prefix = prefix
        self._scripts: dict[str, AsyncScript] = {}

    @property
    @override
    def is_shared(self) -> bool:
        return True

    def _key(self, key: str) -> str:
        return self.prefix + key

    async def _run(self, source: str, key: str, *args: Any) -> Any:
        await self._ready()
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self._client.register_script(source)
        return await script(keys=[self._key(key)], args=list(args))

    @override
    async def get(self, key: str) -> bytes | None:
        async with translated("read a cache key"):
            return await cast(Awaitable[bytes | None], (await self._ready()).get(self._key(key)))

    @override
    async def put(self, key: str, value: bytes, ttl: timedelta | None = None) -> None:
        async with translated("write a cache key"):
            await cast(
                Awaitable[Any],
                (await self._ready()).set(self._key(key), value, px=_ms(ttl) or None),
            )

    @override
    async def add(self, key: str, value: bytes, ttl: timedelta | None = None) -> bool:
        async with translated("add a cache key"):
            done = await cast(
                Awaitable[Any],
                (await self._ready()).set(self._key(key), value, nx=True, px=_ms(ttl) or None),
            )
        return bool(done)

    @override
    async def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl: timedelta | None = None
    ) -> bool:
        async with translated("replace a cache key"):
            return bool(await self._run(_REPLACE_IF, key, expected, value, _ms(ttl)))

    async def replace_many_if(self, items: Sequence[tuple[str, bytes, bytes]]) -> list[bool]:
        """`ReplacesMany`: the `replace_if`s in one pipeline, so one round trip (not on a cluster,
        whose keys may live on several nodes: there, one at a time)."""
        client = await self._ready()
        if self._cluster or len(items) < 2:
            return [await self.replace_if(key, expected, value) for key, expected, value in items]
        script = self._scripts.get(_REPLACE_IF)
        if script is None:  # registered and loaded once by a single call, then sent by its sha
            return [await self.replace_if(key, expected, value) for key, expected, value in items]
        async with translated("replace cache keys"):
            try:
                replies = await self._pipelined(client, script.sha, items)
            except rx.NoScriptError:  # the server lost its scripts (a restart): load, then again
                await client.script_load(_REPLACE_IF)
                replies = await self._pipelined(client, script.sha, items)
        return [bool(reply) for reply in replies]

    async def _pipelined(
        self, client: Client, sha: str, items: Sequence[tuple[str, bytes, bytes]]
    ) -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for key, expected, value in items:
            pipe.evalsha(sha, 1, self._key(key), expected, value, 0)
        replies: list[Any] = await pipe.execute()
        return replies

    @override
    async def forget(self, key: str) -> bool:
        async with translated("delete a cache key"):
            return bool(await (await self._ready()).delete(self._key(key)))

    @override
    async def forget_if(self, key: str, expected: bytes) -> bool:
        async with translated("delete a cache key"):
            return bool(await self._run(_FORGET_IF, key, expected))

    @override
    async def increment(self, key: str, by: int = 1, ttl: timedelta | None = None) -> int:
        try:
            async with translated("increment a counter"):
                return int(await self._run(_INCREMENT, key, by, _ms(ttl)))
        except Exception as exc:
            if isinstance(exc.__cause__, rx.ResponseError) and "NOTINT" in str(exc.__cause__):
                raise ValueError(
                    f"cache key {key!r} holds a value that is not a whole number"
                ) from None
            raise

    @override
    async def flush(self) -> None:
        """Delete every key under this store's prefix, and nothing else."""
        pattern = _glob_escape(self.prefix) + "*"
        async with translated("flush the cache"):
            keys = [k async for k in (await self._ready()).scan_iter(match=pattern, count=1000)]
            for start in range(0, len(keys), 500):
                pipe = (await self._ready()).pipeline(transaction=False)
                for k in keys[start : start + 500]:
                    pipe.delete(k)
                await pipe.execute()

    @override
    async def aclose(self) -> None:
        async with translated("close the connection"):
            await self._client.aclose()


__all__ = ["RedisCache"]
