# SPDX-License-Identifier: MIT
"""Which event loop the command line runs on: uvloop when it is there, else asyncio's own.

A worker draining small jobs spends much of its time in the event loop
itself: scheduling tasks, timers, and socket reads and writes for every
round trip to the broker. uvloop does that work in C; on this project's
benchmark it cut the worker's CPU per job by about a sixth on Redis. So
`rainier-queue work` uses it whenever `rainier-queue[uvloop]` is installed,
and says nothing when it is not. `--event-loop asyncio` (or the variable
`RAINIER_QUEUE_EVENT_LOOP`) keeps the standard loop, for instance to rule
the loop out while chasing a bug; asking for uvloop without it installed
is an error naming the install, never a silent fallback.

The library itself never picks a loop: an application that runs `Worker`
itself runs it on whatever loop it chose.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from collections.abc import Callable

from ..errors import ConfigurationError

CHOICES = ("auto", "asyncio", "uvloop")
"""What `--event-loop` takes."""

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def loop_factory(choice: str) -> LoopFactory:
    """The factory for the loop `choice` names (see the module docs for `auto`)."""
    if choice not in CHOICES:
        raise ConfigurationError(
            f"unknown event loop {choice!r}; choose one of {', '.join(CHOICES)}"
        )
    if choice == "asyncio":
        return asyncio.new_event_loop
    if importlib.util.find_spec("uvloop") is None:
        if choice == "uvloop":
            raise ConfigurationError(
                "the uvloop event loop is not installed: pip install 'rainier-queue[uvloop]'"
            )
        return asyncio.new_event_loop
    factory: LoopFactory = importlib.import_module("uvloop").new_event_loop
    return factory


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """`uvloop` or `asyncio`, for the worker's start-up line."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


__all__ = ["CHOICES", "loop_factory", "loop_name"]
