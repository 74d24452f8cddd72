# SPDX-License-Identifier: MIT
"""The Lua scripts that keep ordering keys: the plain scripts, with a key's line moved too.

Why separate scripts rather than one script with a branch: a job without an
ordering key must cost Redis exactly what it did (the issue's promise for
every flow-control feature), so the push, acknowledge and fail of keyless
jobs still run the scripts of `scripts.py`, byte for byte. A batch with at
least one keyed job runs its variant here, which the driver picks in Python
from the jobs' headers. The reserve has no variant at all: only the one job
of a key that may run is ever in the stream or the delayed set.

The layout (keys.py's `QueueKeys`): `heads` maps each ordering key to the
id of its one job out of the line; `line` is a sorted set, every member
scored 0 and named `<length of key>:<key>:<sequence>`, so `ZRANGEBYLEX`
over `[n:key:` .. `(n:key;` finds a key's held jobs in push order (the
length in front keeps one key's range from holding another's); `held`
maps a member to `<due ms>|<length of id>|<id><body>`; `sequence` numbers
the members. Every key is the queue's own, so each script touches one slot.

A job leaves the line only when the job holding its key is acknowledged or
failed: the settle that removes that job, in the same script, moves the
next one of its key into the stream (or the delayed set, if it was pushed
with a delay that has not run out), and names it in `heads`. A release
(a retry, a job handed back) changes nothing here: the job keeps its key
and its place. A lapsed lease changes nothing either: the entry is
reclaimed as ever, still holding its key.
"""

from __future__ import annotations

from .scripts import ACKNOWLEDGE_FN, CLOCK_FN, MANY_FN, RESERVE_FN, SETTLE_FN

ORDER_FN = """
-- A job due at `due` (server ms; 0: now) goes where jobs due then wait.
local function place(stream, delayed, due, body, now)
  if due > now then
    redis.call('ZADD', delayed, due, body)
  else
    redis.call('XADD', stream, '*', 'body', body)
  end
end

-- The bounds of ordering key `key`'s members in the line, for ZRANGEBYLEX.
local function line_of(key)
  return '[' .. #key .. ':' .. key .. ':', '(' .. #key .. ':' .. key .. ';'
end

-- Job `id` of ordering key `key` is pushed: it takes the key if no job holds it,
-- or waits at the end of the key's line.
local function enter(stream, delayed, heads, line, held, sequence, key, id, due, body, now)
  if redis.call('HSETNX', heads, key, id) == 1 then
    place(stream, delayed, due, body, now)
    return
  end
  local n = redis.call('INCR', sequence)
  local member = #key .. ':' .. key .. ':' .. string.format('%015d', n)
  redis.call('ZADD', line, 0, member)
  redis.call('HSET', held, member, due .. '|' .. #id .. '|' .. id .. body)
end

-- Job `id`, which held ordering key `key`, has ended (acknowledged or failed): the next
-- of the key's line takes the key and goes to the stream, or the key is free.
-- 1 when a job left the line.
local function advance(stream, delayed, heads, line, held, key, id)
  if redis.call('HGET', heads, key) ~= id then return 0 end
  local low, high = line_of(key)
  while true do
    local first = redis.call('ZRANGEBYLEX', line, low, high, 'LIMIT', 0, 1)[1]
    if not first then
      redis.call('HDEL', heads, key)
      return 0
    end
    local entry = redis.call('HGET', held, first)
    redis.call('ZREM', line, first)
    redis.call('HDEL', held, first)
    if entry then
      local bar = string.find(entry, '|', 1, true)
      local bar2 = string.find(entry, '|', bar + 1, true)
      local size = tonumber(string.sub(entry, bar + 1, bar2 - 1))
      redis.call('HSET', heads, key, string.sub(entry, bar2 + 1, bar2 + size))
      place(stream, delayed, tonumber(string.sub(entry, 1, bar - 1)),
            string.sub(entry, bar2 + size + 1), server_ms())
      return 1
    end
  end
end

-- After `acknowledge`: each settled job that held a key lets the next of that key go.
-- `keys[i]` is the i-th job's ordering key ('' for none), `jobs[i]` its job id; an
-- answer of 1 becomes 2 where a job left a line (the caller wakes idle workers).
local function advance_all(stream, delayed, heads, line, held, out, keys, jobs)
  for i, done in ipairs(out) do
    if done == 1 and keys[i] ~= '' then
      if advance(stream, delayed, heads, line, held, keys[i], jobs[i]) == 1 then
        out[i] = 2
      end
    end
  end
  return out
end
"""

PUSH = (
    CLOCK_FN
    + ORDER_FN
    + """
-- KEYS: stream, delayed, heads, line, held, sequence, [wake list: only off-cluster]
-- ARGV: wake_tokens, wake_cap, then for each job: delay_ms (0: due now), ordering key
-- ('' for none), job id, body
local now = server_ms()
for i = 3, #ARGV, 4 do
  local delay, key = tonumber(ARGV[i]), ARGV[i + 1]
  local due = 0
  if delay > 0 then due = now + delay end
  if key == '' then
    place(KEYS[1], KEYS[2], due, ARGV[i + 3], now)
  else
    enter(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], key, ARGV[i + 2], due,
          ARGV[i + 3], now)
  end
end
if KEYS[7] then
  for _ = 1, tonumber(ARGV[1]) do redis.call('LPUSH', KEYS[7], '1') end
  redis.call('LTRIM', KEYS[7], 0, tonumber(ARGV[2]) - 1)
end
return (#ARGV - 2) / 4
"""
)

ACKNOWLEDGE = (
    MANY_FN
    + ACKNOWLEDGE_FN
    + ORDER_FN
    + """
-- KEYS: stream, leases, deliveries, delayed, heads, line, held
-- ARGV: group, then for each job: entry id, token, ordering key ('' for none), job id
-- 1 per job settled, 2 where that let the next of its key go, 0 for a lost lease.
local ids, tokens, keys, jobs = {}, {}, {}, {}
for i = 2, #ARGV, 4 do
  ids[#ids + 1] = ARGV[i]
  tokens[#tokens + 1] = ARGV[i + 1]
  keys[#keys + 1] = ARGV[i + 2]
  jobs[#jobs + 1] = ARGV[i + 3]
end
local out = acknowledge(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ids, tokens)
return advance_all(KEYS[1], KEYS[4], KEYS[5], KEYS[6], KEYS[7], out, keys, jobs)
"""
)

ACKNOWLEDGE_AND_RESERVE = (
    MANY_FN
    + ACKNOWLEDGE_FN
    + RESERVE_FN
    + ORDER_FN
    + """
-- As scripts.ACKNOWLEDGE_AND_RESERVE, the next job of each settled job's key let go
-- before the reserve, which may take it at once.
-- KEYS: stream, delayed, leases, deliveries, cursor, heads, line, held
-- ARGV: group, consumer, lease_ms, limit, n_acks, nonce, then n_acks times: entry id,
-- token, ordering key ('' for none), job id
local limit, acks = tonumber(ARGV[4]), tonumber(ARGV[5])
local ids, held, keys, jobs = {}, {}, {}, {}
for i = 1, acks do
  local at = 6 + 4 * (i - 1)
  ids[i], held[i], keys[i], jobs[i] = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
end
local acked = {}
if acks > 0 then
  acked = acknowledge(KEYS[1], KEYS[3], KEYS[4], ARGV[1], ids, held)
  acked = advance_all(KEYS[1], KEYS[2], KEYS[6], KEYS[7], KEYS[8], acked, keys, jobs)
end
local reserved = reserve(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2],
                         ARGV[3], limit, ARGV[6])
return {acked, reserved}
"""
)

FAIL = (
    CLOCK_FN
    + SETTLE_FN
    + ORDER_FN
    + """
-- KEYS: stream, leases, deliveries, failed, delayed, heads, line, held
-- ARGV: group, entry id, token, failed_record, ordering key, job id
-- 1: failed; 2: failed, and the next of its key let go; 0: a lost lease.
if not current(KEYS[2], ARGV[2], ARGV[3]) then return 0 end
redis.call('LPUSH', KEYS[4], ARGV[4])
drop(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2])
return 1 + advance(KEYS[1], KEYS[5], KEYS[6], KEYS[7], KEYS[8], ARGV[5], ARGV[6])
"""
)

RESTORE_FAILED = (
    CLOCK_FN
    + ORDER_FN
    + """
-- A failed job retried joins the end of its key's line, due now.
-- KEYS: failed, stream, delayed, heads, line, held, sequence
-- ARGV: stored_record, new_body, ordering key, job id
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then return 0 end
enter(KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[3], ARGV[4], 0, ARGV[2],
      server_ms())
return 1
"""
)

REWRITE_HELD = """
-- KEYS: held; ARGV: member, old value, new value
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""

__all__ = [
    "ACKNOWLEDGE",
    "ORDER_FN",
    "ACKNOWLEDGE_AND_RESERVE",
    "FAIL",
    "PUSH",
    "RESTORE_FAILED",
    "REWRITE_HELD",
]
