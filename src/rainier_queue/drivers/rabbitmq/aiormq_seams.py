# SPDX-License-Identifier: MIT
"""Where the driver reaches under aiormq: which aiormq it was written for, and how one of
its classes goes in under aiormq's name.

Why: aiormq has no hooks for reading frames in bulk (frames.py), for
handing a delivery to a consumer without a task (deliveries.py), or for
writing a batch of publishes at once (publishing.py), and those were most
of a RabbitMQ worker's and pusher's time. Each leans on aiormq 7's insides,
so each asks `fits` first; where the installed aiormq is another major
version, aiormq's own code runs and the driver is only slower. A process can
also ask for aiormq's own code by name (`keep_aiormq_as_is`): the way out if
one of these ever misreads what a broker sends, until a fix is released.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging

import aiormq.connection

log = logging.getLogger("rainier_queue.rabbitmq")

WRITTEN_FOR = "7"
"""The aiormq major version whose insides frames.py, deliveries.py and publishing.py use."""


_as_is = False
"""Set by `keep_aiormq_as_is`: nothing goes in under aiormq's names from then on."""

_replaced: dict[str, tuple[type, type]] = {}
"""What `put_in` replaced, by name: aiormq's own class and ours."""


def keep_aiormq_as_is() -> None:
    """Use aiormq's own frame reader, channels and publishes in this process from now on.

    Connections opened after the call read and publish as plain aiormq does,
    only slower (about 1.7 times the worker's instructions per job); call it
    before opening a queue, since a connection opened earlier keeps the reader
    it was given. For the day one of the driver's own readers or writers
    misreads what a broker sends: please report that with the broker's version.
    """
    global _as_is
    _as_is = True
    for name, (theirs, ours) in _replaced.items():
        if getattr(aiormq.connection, name) is ours:
            setattr(aiormq.connection, name, theirs)


def in_use() -> bool:
    """Whether the driver's own reader, channels and publishes may be used here."""
    return not _as_is and fits()


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
    if not in_use() or current is not theirs:
        return False
    _replaced[name] = (theirs, ours)
    setattr(aiormq.connection, name, ours)
    return True


__all__ = ["WRITTEN_FOR", "fits", "in_use", "keep_aiormq_as_is", "put_in"]
