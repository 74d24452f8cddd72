# SPDX-License-Identifier: MIT
"""Deleting a peer's queues on the RabbitMQ server after its run, with the peers' own client."""

from __future__ import annotations

from collections.abc import Sequence

from ._common import AMQP_URL


def delete_queues(names: Sequence[str]) -> None:
    from kombu import Connection  # Celery's, in the peers' venv: here, not for the workers

    with Connection(AMQP_URL) as connection:
        channel = connection.channel()
        for name in names:
            channel.queue_delete(name)
