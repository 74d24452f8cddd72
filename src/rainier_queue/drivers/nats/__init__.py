# SPDX-License-Identifier: MIT
"""The NATS JetStream driver: jobs on a work-queue stream, leases the driver fences itself.

## Read this before choosing it

- **The server does not fence a stale settle; this driver does, on its own
  clock.** NATS 2.9 accepts an ack, a renewal or a nak from a delivery whose
  ack wait ran out, even while a second worker runs the job. So each
  reservation carries its lease deadline (its arrival plus the lease, less a
  margin of a tenth of the lease, at most 5 s), and nothing is sent for it
  after that: the settle is `LeaseLost`. A worker that overran its lease
  never deletes the job another worker is running; the job itself may have
  run twice, so jobs must tolerate a rerun (as on every driver).
- **Delayed jobs cost a second write.** 2.9 has no scheduled messages: a
  delayed job waits on a delayed subject, held back by `nak(delay)` and moved
  onto the queue when due by whichever worker serves the queue (delays.py).
  Only a running worker moves them.
- **A release is a second write.** A released job is published again (on
  the delayed subject when it has a backoff) with its attempts, then its
  delivery acknowledged: a nak would leave it counted as a delivery in
  flight, invisible to `size`, and cannot give an attempt back.
- **Every queue must be provisioned** (`rainier-queue provision`): the
  stream, and per queue a durable consumer and a delay consumer. A push to a
  queue without them is refused (`NotProvisioned`).
- **Dead workers' jobs come back after the lease** (the consumer's
  `ack_wait`), counted as attempts (the server's `num_delivered`). A job that
  reaches `max_deliver` (100 by default, above any job's `tries`) is moved to
  the failed store from the server's advisory, or by the periodic sweep.
- **Duplicates are dropped only within the duplicate window** (2 min): a
  push repeated after `OutcomeUnknown` within it is stored once. So are a
  batch's callbacks (counted in the bucket `<prefix>-batches`, `kvcache.py`):
  a finisher that dies after publishing them and runs again after the
  window queues them twice (`batch_callbacks_exactly_once` False).
- **`storage=memory` loses every job when the server stops**; the queue then
  says so (`may_lose_accepted_job`).

## When it is right anyway

When NATS is already the messaging layer and a second broker is not
welcome; when jobs are many and small and per-job latency matters more than
exact counts. Otherwise PostgreSQL needs nothing new and counts exactly.

## Configuration

    nats://[user:password@|token@]host:4222[,host2:4222]/?prefix=rq&lease=90s

Options, in the query or the connection's table: `prefix` (default `rq`:
the stream `rq-jobs`), `storage` (`file` or `memory`), `replicas`, `lease`
(the consumers' ack wait), `duplicate_window`, `max_deliver`, `sweep_every`,
`publish_timeout`, `nkey` (a seed file), `creds` (a credentials file),
`tls`, `tls_ca`, `insecure_skip_verify`.
"""

from __future__ import annotations

from .queue import NATSMemoryQueue, NATSQueue

__all__ = ["NATSMemoryQueue", "NATSQueue"]
