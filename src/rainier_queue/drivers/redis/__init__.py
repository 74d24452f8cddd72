# SPDX-License-Identifier: MIT
"""The Redis driver: streams with a consumer group, for fast work you can afford to lose.

## Read this before choosing it

Redis is fast and simple to run, and it is the one server driver here
that can lose a job it has accepted. What choosing it costs:

- **A push is acknowledged before it is on disk.** Redis answers a write
  from memory; with `appendfsync everysec` (its usual setting) the last
  second or so of accepted jobs is gone after a crash or power cut, and
  without persistence (`--save "" --appendonly no`, as on our development
  machines) a restart loses every queued job.
- **Replication is asynchronous.** A failover can drop writes the old
  primary had confirmed. The durable mode below (`wait_replicas`) narrows
  that window; it does not close it. A primary without persistence that
  restarts empty wipes its replicas.
- **An evicting `maxmemory-policy` silently deletes queued jobs** under
  memory pressure. Use `noeviction`; `RedisQueue.diagnose()` (and
  `rainier-queue doctor`) warns about anything else, on a cluster for
  each primary it finds it on.
- **No transactional enqueue.** A push never joins the application's
  database transaction.

So it is right for work whose loss is a nuisance (cache warming,
projections, analytics, notifications you can resend), and wrong for
payments or promised emails: use PostgreSQL for those. The driver declares
`may_lose_accepted_job=True`. `survives_restart=True` says that jobs
outlive this driver's processes and are seen by the next one; whether
they outlive a *Redis* restart is Redis's persistence setting, which
`diagnose()` reports.

## How it works

Each queue is a stream with one consumer group (`workers`); a job's
envelope rides in the entry's `body` field. Delayed jobs wait in a sorted
set scored by due time and a Lua script moves them to the stream when they
come due, inside the same atomic step as the reserve, so two workers never
promote one job twice. A reserve of N jobs is one script: promote, reclaim
entries idle longer than the lease (`XAUTOCLAIM`, before any new work),
then read new ones (`XREADGROUP`), recording a fresh token and a delivery
count per entry in two hashes. The job's `attempts` is the count stored in
the body plus the entry's deliveries, so a job that kills its worker every
time still uses up its attempts and reaches the failed store.

Every settle is a script that first checks the reservation's token against
the leases hash: a worker whose lease lapsed and whose job went to another
worker gets `LeaseLost` and changes nothing. Acknowledged entries are
`XACK`ed and `XDEL`eted, so streams do not grow. `renew` re-claims the entry
to the same consumer (`XCLAIM ... JUSTID`), which restarts its idle clock.
Failed jobs are kept per queue in a list, newest first.

An idle worker blocks on a per-namespace wake-up list (`BLPOP`) that
every push appends to, so it starts a new job within a millisecond or two
of the push, from any process.

**Ordering keys.** Only one job of an ordering key is in a queue's stream
or delayed set at a time; the key's later jobs wait in a line beside them,
in the queue's slot, and the script that acknowledges or fails the job
holding the key moves the next one out (`ordering.py`). A key's order is
kept within one queue, not across queues. Jobs without a key run the plain
scripts, unchanged.

**Foreign entries.** `push_raw` appends a bare body for a consumer that is
not this library. If this library's workers reserve such an entry, it is
not a job: it goes straight to the failed store as a job named
`rainier-queue:not-a-job` whose payload is the body text and whose error
says why it did not parse. Nothing crashes and nothing loops.

**Dataset wipes.** The driver keeps a marker key with a random epoch; if
the marker disappears (Redis restarted empty, or was flushed) it logs an
error saying so, rather than carrying on as if the old jobs were there.
A worker checks every few seconds as it reserves; `check_dataset()` checks
at once. A driver pointed at a replica reads the marker without writing
it, so a replica that resynced from a primary that came back empty reports
the loss too.

**Keys and clusters.** Every key starts with the `prefix` option (default
`rq:`), so several applications can share one Redis; queue names are
percent-encoded, and every key of one queue carries the hash tag
`{<queue>}`, so on a cluster (`redis-cluster://host:port,host:port` or
`cluster=true`) each queue lives on one slot and a worker serving several
queues drains all of them, wherever their slots are. A push on a cluster
goes to the node owning its slot on a connection held for the answer,
like a push to a single server, so it is never sent twice.

A Redis on this machine's Unix socket is `unix:///path/to/redis.sock`
(database and password as redis-py reads them: `?db=0`,
`unix://:password@/path`); it takes the same options as `redis://`.

Options (in the query string or the connection's settings): `prefix`,
`lease` (default 90s), `cluster`, `consumer` (default host-pid-random),
`wait_replicas` (default 0) and `wait_timeout` (default 1s).

## Durable mode: waiting for replicas

`wait_replicas=N` (with `wait_timeout`, default `1s`) makes every push
(`push`, `push_many`, `push_raw`) send `WAIT N <timeout>` behind it on the
same connection, in the same round trip, and return only once N replicas
have applied it. That costs a replica's acknowledgement on every push
call (a push_many pays it once per queue, not per job); the default, 0,
sends no `WAIT` and costs nothing.

- **Fewer confirmations than N** raise `NotReplicated` (a kind of
  `OutcomeUnknown`). The jobs are queued on the primary and run if it
  lives until they replicate. Do not push them again: Redis cannot tell a
  repeat from a new job, so that would queue them twice. The error names
  the job ids; find out why the replicas lag (`rainier-queue doctor`
  shows how many are connected and warns if fewer than N).
- **A connection lost after the push was sent** raises `OutcomeUnknown`:
  the push may or may not have been written. A push refused before
  anything was sent (Redis down) is a plain `BrokerUnavailable`, safe to
  retry. This holds without `wait_replicas` too, and on a cluster, where
  each push is sent once on a connection to the node that owns its slot,
  held for the answer, and never resent by the client.
- **Only pushes wait.** A release, a failure or a retry from the failed
  store moves the job inside one script, and Redis replicates a script's
  writes as one unit: a replica that missed the move still has the job
  where it was (delivered, with its lease running), so after a failover it
  is delivered again. Likewise an acknowledgement the replica missed runs
  the job again. Those are duplicates, never losses, which at-least-once
  allows.

What it does not close, so that nobody reads "durable" as more than it is:

- `WAIT` counts replicas that have the write *in memory*; it says
  nothing about disks. A power cut that takes the primary and those
  replicas at once loses it (Redis 7.2's `WAITAOF` waits for fsyncs; this
  driver does not send it).
- The replica promoted after a failure must be one that confirmed. With
  one replica and `wait_replicas=1` it is; with more replicas than N, a
  failover that promotes one that lags (Sentinel prefers the most
  up-to-date, but only among those it can reach) drops what it lacks.
- A primary without persistence that restarts *before* a replica is
  promoted comes back empty, and its replicas copy the emptiness: every
  job is gone, confirmed or not. Promote a replica first (or turn
  persistence on, or keep the primary from restarting on its own); the
  marker check reports the wipe either way.
- The driver connects to one address; it does not follow a failover.
  Promotion means pointing the connection at the new primary. A worker
  left on the old address waits for it, and if it comes back empty,
  reports the wipe and serves an empty queue while the jobs wait on the
  promoted replica.
- On a cluster, each push waits for the replicas of the primary that owns
  its queue's slot; the cluster elects which replica is promoted, so the
  same caveat about a lagging replica applies.
"""

from __future__ import annotations

from ...envelope.reading import NOT_A_JOB
from .diagnosis import Diagnosis
from .queue import RedisQueue

__all__ = ["NOT_A_JOB", "Diagnosis", "RedisQueue"]
