# SPDX-License-Identifier: MIT
"""`Wakeup`: a signal sent between looking for work and waiting is not slept through."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from rainier_queue._wakeup import Wakeup

LONG = timedelta(minutes=5)
WITHIN = 30.0


async def test_a_signal_sent_after_the_mark_ends_the_wait_at_once() -> None:
    wakeup = Wakeup()
    mark = wakeup.heard
    wakeup.notify()  # while the waiter was looking, before it waited
    await asyncio.wait_for(wakeup.wait(LONG, since=mark), WITHIN)


async def test_with_no_signal_since_the_mark_the_wait_waits_for_the_next() -> None:
    wakeup = Wakeup()
    wakeup.notify()
    mark = wakeup.heard
    waiting = asyncio.create_task(wakeup.wait(LONG, since=mark))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    wakeup.notify()
    await asyncio.wait_for(waiting, WITHIN)
