# SPDX-License-Identifier: MIT
"""The Kafka driver: jobs as records on a topic, for when the jobs already live in a log.

## Read this before choosing it

Kafka is a log, not a queue. A reader of a partition has one number, the
offset it has read up to; nothing in Kafka acknowledges one record, hands one
record out again, or holds one back until later. Every port operation has to
be built out of that, and the costs do not go away:

| The port asks to  | A log offers    | So this driver                                  |
|--------------------|-----------------|-------------------------------------------------|
| reserve a job      | a cursor        | leases the partition, hands out the record at   |
|                    | per partition   | the cursor: **one job in flight per partition** |
| acknowledge it     | move the cursor | sets the cursor to offset + 1 (lock store)      |
| release it         | nothing         | produces a copy at the end of the topic with a  |
|                    |                 | `retry-of` header, then moves past the original |
| fail it            | nothing         | produces it to `{topic}.failed`, then moves on  |
| count what waits   | end - cursor    | reports the lag, summed over partitions         |
| clear the queue    | no deletes      | moves every cursor to the end; says how many    |

- **Concurrency is the partition count.** A cursor is one number, so two
  workers on one partition would run each job twice. A six-partition topic
  runs six jobs at once however many workers there are, shared out fairly:
  each worker serves at most ceil(partitions / live workers) of them.
- **A delayed job blocks its partition.** A retry with a backoff is a new
  record at the end of the topic; when a worker reaches it before it is due,
  that partition waits. A queue lets a delayed job step aside; a log has
  nowhere for it to step.
- **Order holds per key only.** Records are keyed by the job's unique key (or
  its id), so jobs sharing a unique key share a partition and run in push
  order; across keys nothing is ordered, and a retry loses its place.
- **It needs a shared lock store** (Redis or a database) for the leases,
  cursors, delivery counts and the roll of each topic's workers, named by
  the `locks` option. One that other
  processes cannot see is refused: every worker would own every partition.
- **Failed jobs can be listed, not retried or forgotten.** They are records
  on `{topic}.failed`; `failed_jobs` reads them back (failed_topics.py), but
  a log cannot take a record back, so there is no retry, forget or flush.
  If that topic does not exist, the failure is logged and the partition
  moves on, never stalls.
- **A push never creates a topic.** The partition count is a decision (it
  is the concurrency), so it is the connection's `partitions` option, and
  `rainier-queue provision` creates each queue's topic and failed topic
  with it (provisioning.py); a push to a missing topic is refused
  (`NotProvisioned`), naming that command.
- **Kafka tooling does not see the consumers.** No consumer group is joined,
  so lag lives in the lock store, and `size` is where to read it.

## When it is right anyway

When the jobs already are events somebody else produces to a topic, and a
queue would need a bridge process that only copies them. When per-key order
matters more than throughput: everything about one account, in order. When
the same stream also feeds other readers and nobody wants it written twice.
Otherwise the PostgreSQL driver is the better job queue and needs no new
infrastructure.

## Why no consumer group

Kafka's group protocol hands partitions out and takes them back by
rebalancing, and its committed offsets assume a consumer that processes in
order and commits as it goes. A job queue must also renew a lease while one
slow job runs, count deliveries of a record that crashed its worker, and
never skip a record by resetting to the latest offset. Leases and cursors in
the lock store do that with a few atomic operations, and a subtly wrong
rebalance state machine is worse than none.

## How it works

- `reserve` walks the topic's partitions, those this worker already holds
  first. For each it takes (or keeps) the lease, reads the cursor, and hands
  out the record there. A partition it passes by is given back at once.
- Each worker holds a seat among the topic's workers in the lock store
  (membership.py), so it knows how many share the partitions and takes at
  most its fair share (sharing.py). One above its share gives partitions
  back between jobs while a worker below its share asks for one; one that
  stayed free for a few seconds (its worker died) is taken even above it.
- A partition never read starts at its **earliest** retained record, so jobs
  pushed before the first worker started are run, not skipped. A cursor that
  retention has overtaken is reported as lost jobs (an error naming the
  partition and the offsets) and the partition rejoins at its earliest record.
- `attempts` is what the record carries plus how many times this offset was
  handed out, which the cursor counts (`offset:deliveries`, written before
  the job runs), so a job that kills its worker every time still reaches its
  last attempt and the failed topic.
- Every cursor move is a compare-and-set from the value written when the job
  was handed out, so a worker whose lease lapsed cannot settle over the one
  that took the partition (it gets `LeaseLost`), and a worker holding a
  partition honours a `clear` from another process at its next hand-out.
  A job costs two writes to the lock store, both to the cursor, and a
  reserve writes the cursors of all the partitions it serves side by side:
  one round-trip wait for the hand-outs, one for the settles.
- A job handed back unrun by a stopping worker stays where it is (the cursor
  never moved) without its delivery counted, and keeps its place in order.
- A record that is not a job is produced to the failed topic, as it was,
  with an error naming what was wrong, before the cursor passes it; a
  failed job the failed topic refuses (too large) is kept without its
  payload, pointing at the original (failing.py).
- The reservation carries the record's position; the job's payload is never
  touched.
- An idle worker polls its partitions' end offsets a few times a second and
  wakes when one that no live worker holds grew (waking.py), not when a busy
  worker's partition did.
- A stopping worker calls `on_worker_stop`, which gives back its leases and
  its seats.

## Configuration

    kafka://broker-1:9092,broker-2:9092/?locks=<URL-encoded lock store URL>

Options, in the query or the connection's table: `locks` (required),
`group` (default `rainier`: workers in one group share the jobs, each group
gets all of them), `topic_prefix`, `lease` (default 90s; must outlast the
longest job between two renewals), `max_wait` (a reserve's fetch wait,
default 100ms), `batch_bytes` (producer batch size), `client_id`, `tls`,
`sasl_mechanism` (with user and password in the URL), and for
`provision`: `partitions` (per queue's topic, default 1) and `replication`
(default 3, or every broker of a smaller cluster).

A queue name of letters, digits, `_` and `-` is its own topic name (after
the prefix); other characters are escaped as `.` and two hex digits.

Producing waits for every in-sync replica (`acks=all`), so an accepted job is
on as many brokers as the topic's `min.insync.replicas` says.
"""

from __future__ import annotations

from .names import FAILED_SUFFIX, KafkaPosition
from .queue import KafkaQueue, require_shared

__all__ = ["FAILED_SUFFIX", "KafkaPosition", "KafkaQueue", "require_shared"]
