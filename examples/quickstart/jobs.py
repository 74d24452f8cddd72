# SPDX-License-Identifier: MIT
"""The quickstart's jobs: one that works, one that recovers, one that gives up.

Real job queues spend their lives on those three cases, so the demo has one
of each, on three queues a worker serves in priority order:

- `charge-card` (queue `payments`) charges an order; a declined card fails
  every attempt and ends in the failed store, where an operator can read why
  and retry it;
- `send-webhook` (queue `webhooks`) calls a customer's endpoint, which
  answers 503 to the first `flaky_attempts` tries and then recovers, as real
  endpoints do; the job's own backoff spaces the retries;
- `resize-image` (queue `media`) is the bulk of the work and always succeeds.

The failures are decided by the payload and the attempt number, never by
chance, so every run tells the same story. Delays are tens of milliseconds
and backoffs a fraction of a second, so the demo ends in seconds.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from rainier_queue import Job, JobContext, JobRegistry

DECLINED = "4000000000000002"
"""The test card number that every charge declines."""


class CardDeclined(Exception):
    """The payment provider refused the card."""


class EndpointUnavailable(Exception):
    """The webhook endpoint answered with a 5xx."""


class ChargeCard(Job):
    name = "charge-card"
    queue = "payments"
    tries = 3

    order_id: int
    amount_cents: int
    card: str

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(milliseconds=50 * attempt)

    async def handle(self, ctx: JobContext) -> None:
        await asyncio.sleep(0.02)  # the payment provider's round trip
        if self.card == DECLINED:
            raise CardDeclined(
                f"order {self.order_id}: card ending {self.card[-4:]} was declined "
                f"({self.amount_cents / 100:.2f} EUR)"
            )


class SendWebhook(Job):
    name = "send-webhook"
    queue = "webhooks"
    tries = 4

    url: str
    event: str
    flaky_attempts: int = 0
    """How many first attempts the endpoint answers 503 to."""

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(milliseconds=150 * attempt)

    async def handle(self, ctx: JobContext) -> None:
        await asyncio.sleep(0.01)  # the HTTP request
        if ctx.attempt <= self.flaky_attempts:
            raise EndpointUnavailable(
                f"POST {self.url} answered 503 Service Unavailable (attempt {ctx.attempt})"
            )


class ResizeImage(Job):
    name = "resize-image"
    queue = "media"

    path: str
    width: int

    async def handle(self, ctx: JobContext) -> None:
        await asyncio.sleep(0.1 + (self.width % 7) / 100)  # the resize itself


registry = JobRegistry([ChargeCard, SendWebhook, ResizeImage])

QUEUES = "payments,webhooks,media"
"""The order a worker serves them in: money first, bulk last."""
