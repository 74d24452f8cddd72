# SPDX-License-Identifier: MIT
"""Where the driver reaches under aiormq: which aiormq it was written for, and how one of
its classes goes in under aiormq's name.

Why: aiormq has no hooks for reading frames in bulk (frames.py), for
handing a delivery to a consumer without a task (deliveries.py), or for
writing a batch of publishes at once (publishing.py), and those were most
of a RabbitMQ worker's and pusher's time. Each leans on aiormq 7's insides,
so each asks `fits` first; where the installed aiormq is another major
version, aiormq's own code runs and the driver is only slower.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging

import aiormq.connection

log = logging.getLogger("rainier_queue.rabbitmq")

WRITTEN_FOR = "7"
"""The aiormq major version whose insides frames.py, deliveries.py and publishing.py use."""


@functools.cache
def fits() -> bool:
    """Whether the installed aiormq is the major version these modules were written for."""
    version = importlib.metadata.version("aiormq")
    if version.split(".")[0] != WRITTEN_FOR:
        log.debug("aiormq %s: its own reader, channels and publishes are kept", version)
        return False
    return True


def put_in(name: str, theirs: type, ours: type) -> bool:
    """Make aiormq's connections use `ours` where they name `name` (a subclass of `theirs`,
    aiormq's own, which must still be there); False where it does not fit."""
    current = getattr(aiormq.connection, name)
    if current is ours:
        return True
    if not fits() or current is not theirs:
        return False
    setattr(aiormq.connection, name, ours)
    return True


__all__ = ["WRITTEN_FOR", "fits", "put_in"]
