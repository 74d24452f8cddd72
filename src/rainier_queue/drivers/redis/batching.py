# SPDX-License-Identifier: MIT
"""Batches as a hash of counters and a set of finished job ids, changed by one Lua script.

Why a script: recording a job's end (a marker added to the set unless it is
there, a count moved) and, for the batch's last job, adding its callbacks'
entries to their streams, must be one step, so that the callbacks are
queued exactly once even when the last two jobs finish at the same moment
on two machines, and never lost to a worker that dies between the two
(`batchstate.py`). A script runs alone on its server, so that is what it
is. It reads the counters and one set member, never the set.

The keys: `<prefix>{<queue>}:batch:<id>` (total, the three counts, when it
was made and finished, and each callback's kind and envelope text split
around its counts) and `...:batch:<id>:done` (the finished job ids, deleted
when the batch finishes). They carry the hash tag of the callbacks' queue,
so on a cluster the script's keys (the batch's two and the callbacks'
stream) sit on one slot; a batch whose callbacks go to more than one queue
is refused on a cluster, saying so, and is fine off one. A batch with no
callbacks is tagged `{_}`. A key tagged `{_}` (`batch-at:<id>`) names the
hash, so a batch is found by its id alone. A finished batch's keys expire
after a week; an unfinished one waits for its jobs as long as they take.

Kept like the jobs: a server without persistence that restarts forgets
its batches with its jobs (`may_lose_accepted_job`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from urllib.parse import quote

from ..._clock import from_micros, to_micros, utcnow
from ...batchstate import BatchProgress, Callback, Member, Outcome
from ...errors import UnsupportedOperation
from ...job import ORDERING_KEY
from .connection import Calls, translated
from .keys import Keys
from .ordered_scripts import ORDER_FN
from .scripts import CLOCK_FN
from .wakeups import WAKE_TOKENS, wake_apart

KEPT = timedelta(days=7)
"""How long a finished batch's hash stays readable by id."""

RECORD = (
    CLOCK_FN
    + ORDER_FN
    + r"""
-- KEYS: batch hash, done set, the stream of each callback in order, then for each callback
-- its queue's delayed set and ordering keys (heads, line, held, sequence), [wake list]
-- ARGV: job id, count field, batch id, now (micros), seconds kept, callbacks, wake cap
-- A callback with an ordering key (fields o<i>, its key, and j<i>, its id) takes its key
-- or joins its key's line, as a push does (ordered_scripts.py).
-- Answers {what, total, succeeded, failed, cancelled, created, finished}: what is 0 for
-- no such batch, 1 for a record that changed nothing or was not the last, 2 + the
-- callbacks queued for the record that finished the batch.
local function answer(what)
  local v = redis.call('HMGET', KEYS[1], 'total', 'succeeded', 'failed', 'cancelled',
    'created', 'finished')
  return {what, v[1], v[2], v[3], v[4], v[5], v[6]}
end
local total = redis.call('HGET', KEYS[1], 'total')
if not total then return {0} end
if redis.call('HEXISTS', KEYS[1], 'finished') == 1 then return answer(1) end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return answer(1) end
redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
local c = redis.call('HMGET', KEYS[1], 'succeeded', 'failed', 'cancelled')
local s, f, x = tonumber(c[1]) or 0, tonumber(c[2]) or 0, tonumber(c[3]) or 0
total = tonumber(total)
if s + f + x < total then return answer(1) end
local counts = string.format(
  [[{\"id\":\"%s\",\"total\":%d,\"succeeded\":%d,\"failed\":%d,\"cancelled\":%d}]],
  ARGV[3], total, s, f, x)
local n, queued = tonumber(ARGV[6]), 0
for i = 1, n do
  local kind = redis.call('HGET', KEYS[1], 'k' .. i)
  if kind == 'finally' or (kind == 'then' and s == total) or (kind == 'catch' and s < total) then
    local before = redis.call('HGET', KEYS[1], 'b' .. i)
    local after = redis.call('HGET', KEYS[1], 'a' .. i)
    local body = before .. counts .. after
    local ordered = redis.call('HGET', KEYS[1], 'o' .. i)
    if ordered then
      local at = 2 + n + 5 * (i - 1)
      enter(KEYS[2 + i], KEYS[at + 1], KEYS[at + 2], KEYS[at + 3], KEYS[at + 4], KEYS[at + 5],
            ordered, redis.call('HGET', KEYS[1], 'j' .. i), 0, body, server_ms())
    else
      redis.call('XADD', KEYS[2 + i], '*', 'body', body)
    end
    queued = queued + 1
  end
end
redis.call('HSET', KEYS[1], 'finished', ARGV[4])
redis.call('DEL', KEYS[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
local wake = KEYS[3 + 6 * n]
if queued > 0 and wake then
  for _ = 1, queued do redis.call('LPUSH', wake, '1') end
  redis.call('LTRIM', wake, 0, tonumber(ARGV[7]) - 1)
end
return answer(2 + queued)
"""
)


class RedisBatches:
    """`BatchStore` for `RedisQueue`: a hash and a set per batch, and the script above."""

    def __init__(self, calls: Calls, keys: Keys, *, cluster: bool) -> None:
        self._calls = calls
        self._keys = keys
        self._cluster = cluster

    def _key(self, batch_id: str, queues: Sequence[str]) -> str:
        tag = quote(queues[0], safe="") if queues else "_"
        return f"{self._keys.prefix}{{{tag}}}:batch:{batch_id}"

    def _where(self, batch_id: str) -> str:
        """The key that names a batch's hash, for finding it by id alone (`batch ID`)."""
        return f"{self._keys.prefix}{{_}}:batch-at:{batch_id}"

    async def open_batch(self, batch_id: str, total: int, callbacks: Sequence[Callback]) -> None:
        queues = [c.queue for c in callbacks]
        if self._cluster and len(set(queues)) > 1:
            raise UnsupportedOperation(
                "on a Redis Cluster a batch's callbacks must all go to one queue: the script "
                "that records the batch's last job queues them in the same step, and a script "
                f"reaches one slot only (these go to {sorted(set(queues))}); nothing was queued. "
                "Give the callbacks one queue"
            )
        fields: dict[Any, Any] = {
            "total": total,
            "succeeded": 0,
            "failed": 0,
            "cancelled": 0,
            "created": to_micros(utcnow()),
            "n": len(callbacks),
        }
        for i, callback in enumerate(callbacks, start=1):
            fields[f"k{i}"] = callback.kind
            fields[f"q{i}"] = callback.queue
            fields[f"b{i}"] = callback.before
            fields[f"a{i}"] = callback.after
            ordered = _ordering_of(callback)
            if ordered is not None:
                fields[f"o{i}"], fields[f"j{i}"] = ordered
        key = self._key(batch_id, queues)
        async with translated("open a batch"):
            client = await self._calls.ready()
            await client.set(self._where(batch_id), key)
            await client.hset(key, mapping=fields)

    async def record_in_batch(
        self, batch: Member, job_id: str, outcome: Outcome
    ) -> BatchProgress | None:
        queues = batch.callback_queues
        key = self._key(batch.batch_id, queues)
        names = [key, key + ":done", *(self._keys.queue(q).stream for q in queues)]
        for q in queues:
            names += [self._keys.queue(q).delayed, *self._keys.queue(q).ordered_keys]
        if not self._cluster:
            names.append(self._keys.wake)
        args = [
            job_id,
            outcome.value,
            batch.batch_id,
            to_micros(utcnow()),
            int(KEPT.total_seconds()),
            len(queues),
            WAKE_TOKENS,
        ]
        reply = await self._calls.run(RECORD, names, args, "record a job of a batch")
        what = int(reply[0])
        if what == 0:
            return None
        if what >= 2:  # this record finished the batch
            async with translated("record a job of a batch"):
                await (await self._calls.ready()).expire(self._where(batch.batch_id), KEPT)
            if what > 2 and self._cluster:
                await wake_apart(await self._calls.ready(), self._keys.wake, what - 2)
        total, succeeded, failed, cancelled, created, finished = reply[1:7]
        return BatchProgress(
            id=batch.batch_id,
            total=int(total),
            succeeded=int(succeeded or 0),
            failed=int(failed or 0),
            cancelled=int(cancelled or 0),
            created_at=from_micros(int(created)),
            finished_at=None if finished is None else from_micros(int(finished)),
        )

    async def batch_progress(self, batch_id: str) -> BatchProgress | None:
        async with translated("find a batch"):
            key = await (await self._calls.ready()).get(self._where(batch_id))
        return None if key is None else await self._read(str(key), batch_id)

    async def _read(self, key: str, batch_id: str) -> BatchProgress | None:
        async with translated("read a batch"):
            raw = await (await self._calls.ready()).hgetall(key)
        fields = {str(k): str(v) for k, v in raw.items()}
        if not fields or "total" not in fields:
            return None
        n = int(fields.get("n", 0))
        callbacks = tuple(
            Callback(fields[f"k{i}"], fields[f"q{i}"], fields[f"b{i}"], fields[f"a{i}"])
            for i in range(1, n + 1)
        )
        finished = fields.get("finished")
        return BatchProgress(
            id=batch_id,
            total=int(fields["total"]),
            succeeded=int(fields.get("succeeded", 0)),
            failed=int(fields.get("failed", 0)),
            cancelled=int(fields.get("cancelled", 0)),
            created_at=from_micros(int(fields["created"])),
            finished_at=None if finished is None else from_micros(int(finished)),
            callbacks=tuple((c.kind, c.name()) for c in callbacks),
        )


def _ordering_of(callback: Callback) -> tuple[str, str] | None:
    """A callback's ordering key and job id, if it has a key: it is then queued as a keyed
    push is, behind an earlier job of its key."""
    try:
        data = json.loads(callback.before + callback.after)
        key = (data.get("headers") or {}).get(ORDERING_KEY)
        return (key, str(data["id"])) if isinstance(key, str) and key else None
    except (ValueError, KeyError, AttributeError, TypeError):
        return None


__all__ = ["KEPT", "RECORD", "RedisBatches"]
