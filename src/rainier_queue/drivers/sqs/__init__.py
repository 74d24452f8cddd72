# SPDX-License-Identifier: MIT
"""The SQS driver: jobs on Amazon SQS queues, for teams on AWS who want nothing to run.

## Read this before choosing it

What choosing it costs:

- **At least once, and the driver fences itself.** SQS hides a received
  message for its visibility timeout (the lease) and hands it out again when
  that ends. It does not fence: a delete with an old receipt handle may
  succeed or quietly do nothing, and moto accepts any handle it ever
  issued. So the driver keeps each delivery's deadline and sends nothing for
  it after that (`LeaseLost`): an overrunning worker never deletes the job
  another worker holds, but the job may have run twice.
- **Counts are approximate.** `size` and `counts` are SQS's
  `ApproximateNumberOf...` figures, which lag by seconds; `clear` is
  `PurgeQueue`, once a minute per queue.
- **Delays go to 15 minutes on the server** (`DelaySeconds`, standard
  queues). A longer delay is carried: the message goes with the whole delay
  in an attribute, and the first worker to receive it early hides it until
  it is due, by SQS's clock. While hidden it counts as in flight, not
  delayed. A FIFO queue takes no per-message delay: its delayed jobs wait
  in a standard delay queue beside it and workers move them over when due
  (delays.py); a keyed one is carried in its key's message group.
- **256 KiB a message** unless `max_message_size` says more (SQS takes up
  to 1 MiB since 2025): a larger job is a `PayloadError` at dispatch.
- **The lease is the visibility timeout**: whole seconds, renewed with
  `ChangeMessageVisibility`, and at most 12 hours from a receipt in all; a
  job that runs longer cannot be held.
- **A retry with a delay, or a job handed back at shutdown, is sent again**
  (a send and a delete), so that it counts as waiting; a plain retry is one
  visibility change.
- **FIFO queues give deduplication, and order per ordering key**: a job
  with an ordering key goes to its key's message group, which SQS hands out
  one message at a time, in order (ordering.py); every other job is its own
  group. Its id is the deduplication id, so a push repeated within 5
  minutes is one job. A retry with a backoff is sent again, to the back of
  its group. Order across keys holds on neither kind of queue
  (`fifo_within_queue` is false), and a standard queue refuses a job with
  an ordering key.
- **Every queue must be provisioned** (`rainier-queue provision`): its work
  queue, its failed queue, and on FIFO its delay queue. A push to a queue that does not exist is
  refused (`NotProvisioned`).

## When it is right

On AWS, when nothing to run or patch matters more than per-job latency
(tens of milliseconds a call) and exact counts; when the jobs' rate is
modest or their batches large (SQS bills per request: about 0.3 requests a
job at steady state here). Otherwise PostgreSQL (or RDS) is the simpler
queue.

## How it works

- A push sends the envelope (`SendMessage`; `push_many` ten a call with
  `SendMessageBatch`, calls side by side).
- A reserve receives at most what the worker can run (`ReceiveMessage`, ten a
  call), with the lease as the visibility timeout; an idle worker long-polls
  (`WaitTimeSeconds`, the `wait` option). Attempts are the envelope's plus
  SQS's `ApproximateReceiveCount`, so a delivery to a worker that died counts.
- Acknowledgements are deletes, batched (`DeleteMessageBatch`).
- `fail` sends the job with its error to the queue's failed queue, then
  deletes it (failed.py); `failed`, `retry`, `forget` and `flush` work there.

## Configuration

    sqs://[KEY:SECRET@][host:port]/?region=eu-west-1&prefix=app-&fifo=true&lease=90s&wait=20s

See docs/drivers/sqs.md for every option.
"""

from __future__ import annotations

from .queue import SQSQueue

__all__ = ["SQSQueue"]
