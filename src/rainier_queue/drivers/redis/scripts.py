# SPDX-License-Identifier: MIT
"""The Lua scripts: every step that must not interleave with another worker's.

Redis runs a script to the end before it serves anyone else, so each of
these is atomic. Each touches the keys of one queue only (one hash tag,
one cluster slot). The settles all begin the same way: the delivery's
token must still be the one in the leases hash, or the script changes
nothing and answers 0, which the driver turns into `LeaseLost`.

Key order is fixed per script and documented at its top; `ARGV` carries
the consumer group, durations in milliseconds (a lease, a delay) and
tokens (a reserve is given one fresh token and hands its i-th job
`token.i`). No script is given the time: each reads the server's (`TIME`),
so machines whose clocks disagree still agree on when a delayed job is due.
"""

from __future__ import annotations

# Lua's `unpack` takes a few thousand values at most, so commands over many
# ids go in chunks; one command per chunk, not one per job, is what keeps a
# batch cheap (each `redis.call` costs about as much as a small command).
CLOCK_FN = """
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
"""

MANY_FN = (
    CLOCK_FN
    + """
local function many(command, key, list, first)
  local answers = {}
  for i = 1, #list, 1000 do
    local chunk = {unpack(list, i, math.min(i + 999, #list))}
    local got
    if first then
      got = redis.call(command, key, first, unpack(chunk))
    else
      got = redis.call(command, key, unpack(chunk))
    end
    if type(got) == 'table' then
      for _, value in ipairs(got) do answers[#answers + 1] = value end
    end
  end
  return answers
end
"""
)

RESERVE_FN = """
-- Reserve up to `limit` entries of one queue; the i-th one's token is `nonce.i`.
local function reserve(stream, delayed, leases, deliveries, cursor,
                       group, consumer, lease, limit, nonce)
  -- Delayed jobs that came due join the stream, in due order, exactly once.
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', server_ms(), 'LIMIT', 0, 1000)
  for _, body in ipairs(due) do
    redis.call('ZREM', delayed, body)
    redis.call('XADD', stream, '*', 'body', body)
  end

  -- Entries whose lease lapsed come first, then new ones. The group is made
  -- when the first reserve finds it missing, not tried for on every reserve:
  -- that cost a command, and an error reply (BUSYGROUP) in Redis's error
  -- counters, per reserve.
  local picked = {}
  local start = redis.call('GET', cursor) or '0-0'
  local claimed = redis.pcall('XAUTOCLAIM', stream, group, consumer, lease, start,
                              'COUNT', limit)
  if claimed.err then
    if string.sub(claimed.err, 1, 8) ~= 'NOGROUP ' then error(claimed) end
    redis.call('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
    claimed = redis.call('XAUTOCLAIM', stream, group, consumer, lease, start, 'COUNT', limit)
  end
  redis.call('SET', cursor, claimed[1])
  for _, entry in ipairs(claimed[2]) do picked[#picked + 1] = entry end
  if claimed[3] and #claimed[3] > 0 then
    many('HDEL', leases, claimed[3])
    many('HDEL', deliveries, claimed[3])
  end
  if #picked < limit then
    local fresh = redis.call('XREADGROUP', 'GROUP', group, consumer,
                             'COUNT', limit - #picked, 'STREAMS', stream, '>')
    if fresh then
      for _, entry in ipairs(fresh[1][2]) do picked[#picked + 1] = entry end
    end
  end

  if #picked == 0 then return {} end
  -- Each picked entry gets its token and one more delivery: read and written
  -- once for the whole batch, not a command per entry.
  local ids = {}
  for i, entry in ipairs(picked) do ids[i] = entry[1] end
  local counts = many('HMGET', deliveries, ids)
  local counted, held, out = {}, {}, {}
  for i, entry in ipairs(picked) do
    local id, fields, body = entry[1], entry[2], false
    if fields then
      for j = 1, #fields, 2 do
        if fields[j] == 'body' then body = fields[j + 1] end
      end
    end
    local count = (tonumber(counts[i]) or 0) + 1
    counted[#counted + 1] = id
    counted[#counted + 1] = count
    held[#held + 1] = id
    held[#held + 1] = nonce .. '.' .. i
    out[#out + 1] = {id, body or '', count}
  end
  many('HSET', deliveries, counted)
  many('HSET', leases, held)
  return out
end
"""

ACKNOWLEDGE_FN = """
-- Acknowledge (id, token) pairs of one queue: the same check and removal as
-- the other settles, done for the whole batch with one command of each kind.
-- 1 per pair whose token still held the lease, 0 for the others.
local function acknowledge(stream, leases, deliveries, group, ids, tokens)
  local holders = many('HMGET', leases, ids)
  local out, done, seen = {}, {}, {}
  for i, id in ipairs(ids) do
    -- An id named twice is settled once; the second finds its token gone.
    if holders[i] == tokens[i] and not seen[id] then
      seen[id] = true
      done[#done + 1] = id
      out[i] = 1
    else
      out[i] = 0
    end
  end
  if #done > 0 then
    many('XACK', stream, done, group)
    many('XDEL', stream, done)
    many('HDEL', leases, done)
    many('HDEL', deliveries, done)
  end
  return out
end
"""

RESERVE = (
    MANY_FN
    + RESERVE_FN
    + """
-- KEYS: stream, delayed, leases, deliveries, cursor
-- ARGV: group, consumer, lease_ms, limit, nonce
return reserve(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2], ARGV[3],
               tonumber(ARGV[4]), ARGV[5])
"""
)

ACKNOWLEDGE_AND_RESERVE = (
    MANY_FN
    + ACKNOWLEDGE_FN
    + RESERVE_FN
    + """
-- A busy worker's acknowledgements and its next reserve from the same queue,
-- as one script: one command, atomic, and the acknowledged leases are gone
-- before the reserve looks for lapsed ones.
-- KEYS: stream, delayed, leases, deliveries, cursor
-- ARGV: group, consumer, lease_ms, limit, n_acks, nonce, then n_acks pairs of id and token
local limit, acks = tonumber(ARGV[4]), tonumber(ARGV[5])
local ids, held = {}, {}
for i = 1, acks do
  ids[i] = ARGV[6 + 2 * i - 1]
  held[i] = ARGV[6 + 2 * i]
end
local acked = {}
if acks > 0 then
  acked = acknowledge(KEYS[1], KEYS[3], KEYS[4], ARGV[1], ids, held)
end
local reserved = reserve(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2],
                         ARGV[3], limit, ARGV[6])
return {acked, reserved}
"""
)

PUSH = (
    CLOCK_FN
    + """
-- KEYS: stream, delayed, [wake list: only off-cluster, where any keys may meet]
-- ARGV: wake_tokens, wake_cap, then pairs of delay_ms (0: due now) and body
local now = nil
for i = 3, #ARGV, 2 do
  if ARGV[i] == '0' then
    redis.call('XADD', KEYS[1], '*', 'body', ARGV[i + 1])
  else
    now = now or server_ms()
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[i]), ARGV[i + 1])
  end
end
if KEYS[3] then
  for _ = 1, tonumber(ARGV[1]) do redis.call('LPUSH', KEYS[3], '1') end
  redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[2]) - 1)
end
return (#ARGV - 2) / 2
"""
)

SETTLE_FN = """
local function current(leases, id, token)
  return redis.call('HGET', leases, id) == token
end
local function drop(stream, leases, deliveries, group, id)
  redis.call('XACK', stream, group, id)
  redis.call('XDEL', stream, id)
  redis.call('HDEL', leases, id)
  redis.call('HDEL', deliveries, id)
end
"""

ACKNOWLEDGE = (
    MANY_FN
    + ACKNOWLEDGE_FN
    + """
-- KEYS: stream, leases, deliveries
-- ARGV: group, id_1, token_1, id_2, token_2, ...
local ids, tokens = {}, {}
for i = 2, #ARGV, 2 do
  ids[#ids + 1] = ARGV[i]
  tokens[#tokens + 1] = ARGV[i + 1]
end
return acknowledge(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ids, tokens)
"""
)

RELEASE = (
    CLOCK_FN
    + SETTLE_FN
    + """
-- KEYS: stream, delayed, leases, deliveries
-- ARGV: group, id, token, new_body, delay_ms (0: due now, else from the server's clock)
if not current(KEYS[3], ARGV[2], ARGV[3]) then return 0 end
-- The job is written back before the old entry goes, so a crash loses nothing.
if tonumber(ARGV[5]) > 0 then
  redis.call('ZADD', KEYS[2], server_ms() + tonumber(ARGV[5]), ARGV[4])
else
  redis.call('XADD', KEYS[1], '*', 'body', ARGV[4])
end
drop(KEYS[1], KEYS[3], KEYS[4], ARGV[1], ARGV[2])
return 1
"""
)

FAIL = (
    SETTLE_FN
    + """
-- KEYS: stream, leases, deliveries, failed
-- ARGV: group, id, token, failed_record
if not current(KEYS[2], ARGV[2], ARGV[3]) then return 0 end
redis.call('LPUSH', KEYS[4], ARGV[4])
drop(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2])
return 1
"""
)

RENEW = """
-- KEYS: stream, leases
-- ARGV: group, consumer, id, token
if redis.call('HGET', KEYS[2], ARGV[3]) ~= ARGV[4] then return 0 end
-- XCLAIM with min-idle 0 resets the entry's idle time: the lease starts again.
local got = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
if #got == 0 then return 0 end
return 1
"""

SIZE = """
-- KEYS: stream, delayed, line (the jobs held behind an earlier one of their ordering key)
-- ARGV: group
local length = redis.call('XLEN', KEYS[1])
local pending = 0
local summary = redis.pcall('XPENDING', KEYS[1], ARGV[1])
if type(summary) == 'table' and not summary.err then pending = summary[1] end
return length - pending + redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[3])
"""

COUNTS = (
    CLOCK_FN
    + """
-- KEYS: stream, delayed, line (the jobs held behind an earlier one of their ordering key)
-- ARGV: group, lease in ms
-- Answers: waiting (held ones included), delayed, reserved, whether something falls due
-- later, and in how many ms from now the soonest delayed job falls due or held lease
-- ends (<= 0: lapsed).
local now = server_ms()
local length = redis.call('XLEN', KEYS[1])
local reserved = 0
local summary = redis.pcall('XPENDING', KEYS[1], ARGV[1])
if type(summary) == 'table' and not summary.err then reserved = summary[1] end
local due = redis.call('ZCOUNT', KEYS[2], '-inf', now)
local later = redis.call('ZCARD', KEYS[2]) - due
local known, soonest = 0, 0
if later > 0 then
  local first = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf',
                           'WITHSCORES', 'LIMIT', 0, 1)
  known, soonest = 1, tonumber(first[2]) - now
end
if reserved > 0 then
  -- The entry idle longest is the one whose lease ends first.
  local idlest = 0
  for _, entry in ipairs(redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 10000)) do
    if entry[3] > idlest then idlest = entry[3] end
  end
  local ends = tonumber(ARGV[2]) - idlest
  if known == 0 or ends < soonest then soonest = ends end
  known = 1
end
local held = redis.call('ZCARD', KEYS[3])
return {length - reserved + due + held, later, reserved, known, soonest}
"""
)

OLDEST = (
    CLOCK_FN
    + """
-- KEYS: stream, delayed
-- ARGV: group
-- Answers how many ms the job due longest ago and not delivered has been due, or -1:
-- the first entry the group has not delivered (its id is the server's time when it was
-- added: pushed due, or moved in from the delayed set), or the earliest delayed job due
-- but not moved in yet (its score), whichever is older. Delivered entries are not
-- counted, a lapsed lease's included, as on the other drivers.
local now = server_ms()
local oldest = -1
local last = '0-0'
local groups = redis.pcall('XINFO', 'GROUPS', KEYS[1])
if type(groups) == 'table' and not groups.err then
  for _, group in ipairs(groups) do
    local fields = {}
    for i = 1, #group, 2 do fields[group[i]] = group[i + 1] end
    if fields['name'] == ARGV[1] then last = fields['last-delivered-id'] end
  end
end
local first = redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', 1)
if #first > 0 then
  oldest = math.max(0, now - tonumber(string.match(first[1][1], '^(%d+)')))
end
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
if #due > 0 and now - tonumber(due[2]) > oldest then oldest = now - tonumber(due[2]) end
return oldest
"""
)

CLEAR = """
-- KEYS: stream, delayed, leases, heads, line, held
-- Waiting entries go; delivered ones stay, so their holders can still settle them. The
-- jobs held behind their ordering key go too, and a key whose job out of the line went
-- is let go; one whose job is delivered stays that job's.
local removed = redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[5])
redis.call('DEL', KEYS[2], KEYS[5], KEYS[6])
local keyed = redis.call('HLEN', KEYS[4]) > 0
local running = {}
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  if redis.call('HEXISTS', KEYS[3], entry[1]) == 0 then
    redis.call('XDEL', KEYS[1], entry[1])
    removed = removed + 1
  elseif keyed then
    local fields = entry[2]
    for i = 1, #fields, 2 do
      if fields[i] == 'body' then
        local ok, job = pcall(cjson.decode, fields[i + 1])
        if ok and type(job) == 'table' and type(job['id']) == 'string' then
          running[job['id']] = true
        end
      end
    end
  end
end
if keyed then
  local heads = redis.call('HGETALL', KEYS[4])
  for i = 1, #heads, 2 do
    if not running[heads[i + 1]] then redis.call('HDEL', KEYS[4], heads[i]) end
  end
end
return removed
"""

RETIRE_CONSUMERS = """
-- KEYS: stream
-- ARGV: group, own consumer, idle_ms
-- A consumer holding no pending entry goes: this worker's own, and any other
-- idle longer than idle_ms (a worker that died; a live one that reads again
-- is simply made anew). One holding entries stays, so they can be reclaimed.
local consumers = redis.pcall('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if type(consumers) ~= 'table' or consumers.err then return 0 end
local removed = 0
for _, consumer in ipairs(consumers) do
  local name, pending, idle = nil, 1, 0
  for i = 1, #consumer, 2 do
    if consumer[i] == 'name' then name = consumer[i + 1]
    elseif consumer[i] == 'pending' then pending = consumer[i + 1]
    elseif consumer[i] == 'idle' then idle = consumer[i + 1] end
  end
  if name and pending == 0 and (name == ARGV[2] or idle > tonumber(ARGV[3])) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
    removed = removed + 1
  end
end
return removed
"""

RESTORE_FAILED = """
-- KEYS: failed, stream
-- ARGV: stored_record, new_body
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then return 0 end
redis.call('XADD', KEYS[2], '*', 'body', ARGV[2])
return 1
"""

__all__ = [
    "ACKNOWLEDGE",
    "ACKNOWLEDGE_AND_RESERVE",
    "CLEAR",
    "FAIL",
    "OLDEST",
    "PUSH",
    "RELEASE",
    "RENEW",
    "RESERVE",
    "RESTORE_FAILED",
    "RETIRE_CONSUMERS",
    "SIZE",
]
