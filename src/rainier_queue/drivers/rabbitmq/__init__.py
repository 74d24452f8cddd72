# SPDX-License-Identifier: MIT
"""The RabbitMQ driver: quorum queues with publisher confirms, for teams that already run RabbitMQ.

## Read this before choosing it

What choosing it costs:

- **No lease to renew, and a cap on a job's run time.** AMQP 0-9-1 has no
  way to extend a delivery: a job is held until it is settled or its
  channel closes. Nothing lapses on a clock, so the driver declares
  `renews_leases=False` and `reclaims_lapsed_leases=False`; a worker that
  dies loses its connection, and the broker hands its jobs out again at
  once, each delivery counted. The one clock is the server's
  `consumer_timeout` (30 minutes by default): a delivery unacknowledged
  for longer makes RabbitMQ close the **whole channel**, which puts back
  every job that channel held, running or not. Their settles are then
  refused (`LeaseLost`) and they run again. So keep every job (its
  `timeout`) well under the server's `consumer_timeout`, or raise it on
  the server.
- **Delays are tiers, not moments.** Quorum queues expire a message only
  at the head of the queue, so a delay is served by queues of fixed TTL
  (the `delays` option, 1s, 5s, 30s, 2m, 10m and 1h unless told), each
  dead-lettering back into the work queue. A delay takes the longest tier
  that fits and goes round again for the rest: a job is never early, and
  late by at most the shortest tier (and the time for a worker to see it).
  Every tier is a quorum queue per queue name. The time left rides from
  tier to tier in a header, so a delay runs on the server's clock: a
  producer whose clock is off neither holds a job back nor lets it out early.
- **Attempts count deliveries, and the broker keeps a cap of its own.**
  `attempts` is what the job carries plus RabbitMQ's `x-delivery-count` +
  1, so a job that kills its worker reaches its last attempt. Beyond
  `delivery_limit` (20) redeliveries the broker dead-letters a job itself;
  a job with more `tries` than that, which keeps killing its worker, is
  capped there.
- **A retry, a job handed back at shutdown, and a delayed push each cost a
  publish**: the broker cannot delay a requeue, puts it at the head, and
  says nothing when it is back. Such a job goes to the back of its queue.
- **Failed jobs live in one dead-letter queue per connection**, and reading
  a queue means taking its messages: listing, retrying and forgetting read
  the whole failed queue. Flush what you have looked at.
- **A push never creates a queue.** `rainier-queue provision` declares
  them; a push to a queue that was never provisioned is refused
  (`NotProvisioned`). A queue declared otherwise (classic, another limit)
  is reported by `doctor` with the fix; provisioning never deletes one,
  and refuses one of the other type than the connection's `queue_type`.
- **Classic queues only by name** (`queue_type=classic`): unreplicated,
  tiers dead-lettering at most once, no delivery count or limit (a
  redelivered job is republished with the attempt folded in); the
  capabilities (`may_lose_accepted_job`) and `doctor` call them lossy.
- **A stopping worker lets its window fill or go quiet before it cancels**
  (consuming.py): a job a quorum queue hands out during the cancel is taken
  back counted, unseen. A push in that very moment can still cost one try.
- **No priorities inside a queue** (quorum queues have none): give each
  priority its own queue and list them in order to the worker.

## When it is right

When RabbitMQ is already what the team runs, or what Celery or Dramatiq
used: jobs move without moving the broker, and a quorum queue is a durable,
replicated home for them. Otherwise the PostgreSQL driver is the simpler
queue and needs no new infrastructure.

## How it works

- A push publishes the job's JSON envelope, persistent, to its work queue
  (or a delay tier) through the default exchange, `mandatory`, and waits for
  the publisher confirm: a nack is `BrokerRejected`, a confirm that never
  comes `OutcomeUnknown`, a message no queue takes `NotProvisioned`.
- Workers consume (`basic.consume`); the broker pushes jobs into a window
  the size of the worker's free slots, or 64 while its jobs are quick
  (window.py), and a worker's reserve takes what was pushed; anything else's
  reserve takes its jobs with `basic.get` (consuming.py). A reservation
  holds the channel and delivery tag, never anything in the payload.
- Acknowledgements ride on the worker's ack batching: the longest run of
  tags is acknowledged with one `multiple=True` frame, confirmed by a round
  trip in the background (consuming.py says how a lost one is remembered).
- `release` publishes a copy with the attempts so far (to the work queue or
  its delay tier), confirmed, and acknowledges the delivery; never `nack`.
- `fail` publishes the job with its error to the failed queue, confirmed,
  then acknowledges the delivery (failed.py).
- A lost connection, a broker restart and a blocked connection (a memory or
  disk alarm) are outages (`BrokerUnavailable`) that the worker rides out;
  the next call connects again.

## Configuration

    amqp://user:password@host:5672/vhost?prefix=rq.&delays=1s,30s,10m&delivery_limit=20

`amqps://` for TLS (`ssl_ca_certs` for a private authority,
`insecure_skip_verify=true` to skip the check). `confirm_timeout` (30s) is
how long a push waits for its confirm. `lease` is the server's
`consumer_timeout` as configured there (30m): what `Queue.lease` reports,
and the cap on a job's run time.
"""

from __future__ import annotations

from .aiormq_seams import keep_aiormq_as_is
from .names import AMQPDelivery
from .queue import RabbitMQQueue

__all__ = ["AMQPDelivery", "RabbitMQQueue", "keep_aiormq_as_is"]
