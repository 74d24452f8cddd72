# SPDX-License-Identifier: MIT
"""Rewriting stored payloads (`rainier-queue reencrypt`) on Redis, one Lua script per entry.

A queue's jobs sit in four places, and each is rewritten its own way,
each write a compare-and-set in one script on the queue's slot, so that an
entry settled, reserved or rewritten meanwhile is left as it now is:

- the delayed set: the member replaced by the new body, with its score
  (due time) kept;
- the jobs held behind their ordering keys (`ordering.py`): each value
  replaced in its hash, so a job keeps its place in its key's line;
- the failed list: the record replaced where it stands (`LPOS`, `LSET`);
- the stream: an entry no worker has been handed yet is appended anew with
  the new body and the old one deleted. A stream entry cannot be changed in
  place, so such jobs move behind any pushed after the rewrite began; an
  entry a worker holds (in the group's pending list) is left alone, since
  its settles name that entry, and counted as in flight. Released, it comes
  back as a new entry under its old payload, which a later rewrite moves.

Queues are found by their keys (`SCAN` for streams and delayed sets, on
every node of a cluster) and by the set of queues that had failed jobs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...envelope import QueuedJob
from ...envelope.reading import read_envelope
from ...queue import Rewrite, Rewritten
from .connection import Calls, translated
from .keys import GROUP, Keys, QueueKeys
from .ordered_scripts import REWRITE_HELD
from .ordering import Held, read_held

PAGE = 200
"""Entries read per call."""

_DELAYED = """
-- KEYS: delayed; ARGV: old member, new member
local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not due then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], due, ARGV[2])
return 1
"""

_FAILED = """
-- KEYS: failed list; ARGV: old record, new record
local at = redis.call('LPOS', KEYS[1], ARGV[1])
if not at then return 0 end
redis.call('LSET', KEYS[1], at, ARGV[2])
return 1
"""

_ENTRY = """
-- KEYS: stream; ARGV: group, entry id, old body, new body
-- 1: moved; 0: gone or changed; -1: a worker holds it
local found = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
if #found == 0 then return 0 end
local fields, body = found[1][2], nil
for i = 1, #fields, 2 do
  if fields[i] == 'body' then body = fields[i + 1] end
end
if body ~= ARGV[3] then return 0 end
local pending = redis.pcall('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if type(pending) == 'table' and pending.err == nil and #pending > 0 then return -1 end
redis.call('XADD', KEYS[1], '*', 'body', ARGV[4])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
"""


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


class RedisRewriter:
    """`RewritesStoredJobs` for `RedisQueue`: a part of the queue, on its client and keys."""

    def __init__(self, calls: Calls, keys: Keys) -> None:
        self._calls = calls
        self.keys = keys

    async def rewrite(self, rewrite: Rewrite) -> Rewritten:
        done = in_flight = 0
        for queue in await self._queues():
            keys = self.keys.queue(queue)
            done += await self._delayed(keys, rewrite)
            moved, held = await self._stream(keys, rewrite)
            done += moved
            in_flight += held
            done += await self._held(keys, rewrite)
            done += await self._failed(keys, rewrite)
        return Rewritten(done, in_flight)

    async def _queues(self) -> list[str]:
        client = await self._calls.ready()
        prefix = self.keys.prefix
        found: set[str] = set()
        async with translated("find the queues to rewrite"):
            for suffix in ("stream", "delayed"):
                async for key in client.scan_iter(match=f"{prefix}{{*}}:{suffix}", count=1000):
                    name = _text(key)[len(prefix) + 1 : -len(suffix) - 2]
                    found.add(self.keys.decode_queue(name))
            for member in await client.smembers(self.keys.failed_queues):
                found.add(_text(member))
        return sorted(found)

    async def _delayed(self, keys: QueueKeys, rewrite: Rewrite) -> int:
        client = await self._calls.ready()
        count = 0
        start = 0
        while True:
            async with translated("read the delayed jobs to rewrite"):
                members: Sequence[Any] = await client.zrange(keys.delayed, start, start + PAGE - 1)
            for member in members:
                new = _rewritten_body(member, rewrite)
                if new is not None:
                    count += await self._calls.run(
                        _DELAYED, [keys.delayed], [member, new], "rewrite a delayed job"
                    )
            if len(members) < PAGE:
                return count
            start += PAGE

    async def _stream(self, keys: QueueKeys, rewrite: Rewrite) -> tuple[int, int]:
        client = await self._calls.ready()
        held = await self._pending(keys)
        moved = in_flight = 0
        after = "-"
        while True:
            async with translated("read the stream entries to rewrite"):
                entries: Sequence[Any] = (
                    await client.xrange(keys.stream, min=after, max="+", count=PAGE) or []
                )
            for entry_id, fields in entries:
                entry = _text(entry_id)
                if entry in held:
                    in_flight += 1
                    continue
                body = (fields or {}).get(b"body", (fields or {}).get("body"))
                new = None if body is None else _rewritten_body(body, rewrite)
                if new is None:
                    continue
                outcome = await self._calls.run(
                    _ENTRY, [keys.stream], [GROUP, entry, body, new], "rewrite a waiting job"
                )
                moved += outcome == 1
                in_flight += outcome == -1
            if len(entries) < PAGE:
                return moved, in_flight
            after = f"({_text(entries[-1][0])}"

    async def _pending(self, keys: QueueKeys) -> set[str]:
        """The ids of the stream's entries that workers hold."""
        client = await self._calls.ready()
        held: set[str] = set()
        after = "-"
        while True:
            try:
                async with translated("read the jobs workers hold"):
                    page = await client.xpending_range(keys.stream, GROUP, after, "+", PAGE)
            except Exception:
                return held  # no group (or no stream) yet: nothing was handed out
            held.update(_text(item["message_id"]) for item in page)
            if len(page) < PAGE:
                return held
            after = f"({_text(page[-1]['message_id'])}"

    async def _held(self, keys: QueueKeys, rewrite: Rewrite) -> int:
        """The jobs held behind their ordering keys: each value replaced where it stands."""
        client = await self._calls.ready()
        count = 0
        async with translated("read the held jobs to rewrite"):
            found = [(m, v) async for m, v in client.hscan_iter(keys.held, count=PAGE)]
        for member, value in found:
            held = read_held(_text(value))
            new = None if held is None else _rewritten_body(held.body, rewrite)
            if held is None or new is None:
                continue
            again = Held(due_ms=held.due_ms, job_id=held.job_id, body=new).value()
            count += await self._calls.run(
                REWRITE_HELD, [keys.held], [member, value, again], "rewrite a held job"
            )
        return count

    async def _failed(self, keys: QueueKeys, rewrite: Rewrite) -> int:
        client = await self._calls.ready()
        async with translated("read the failed jobs to rewrite"):
            records: Sequence[Any] = await client.lrange(keys.failed, 0, -1)
        count = 0
        for record in records:
            new = _rewritten_record(record, rewrite)
            if new is not None:
                count += await self._calls.run(
                    _FAILED, [keys.failed], [record, new], "rewrite a failed job"
                )
        return count


def _rewritten_body(body: Any, rewrite: Rewrite) -> str | None:
    """The new stored body of an envelope `rewrite` changes; None to leave it."""
    job = read_envelope(body)
    if not isinstance(job, QueuedJob):
        return None
    new = rewrite(job)
    return None if new is None else new.to_json()


def _rewritten_record(record: Any, rewrite: Rewrite) -> str | None:
    """The new failed record (`{"job": ..., "error": ..., "failed_at": ...}`), or None."""
    try:
        data = json.loads(record)
        job = QueuedJob.from_dict(data["job"])
    except Exception:
        return None  # not a job: kept as it was
    new = rewrite(job)
    if new is None:
        return None
    data["job"]["payload"] = new.payload
    return json.dumps(data, separators=(",", ":"))


__all__ = ["RedisRewriter"]
