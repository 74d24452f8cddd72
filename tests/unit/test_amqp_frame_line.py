# SPDX-License-Identifier: MIT
"""The line that carries a RabbitMQ channel's frames from the connection's reader to the
channel's (deliveries.py): in order, bounded, and unharmed by a waiter that was cancelled."""

from __future__ import annotations

import asyncio

from rainier_queue.drivers.rabbitmq.deliveries import FrameLine


def test_frames_come_out_in_the_order_they_went_in_across_waits() -> None:
    async def run() -> list[int]:
        line = FrameLine(3)
        got: list[int] = []

        async def reader() -> None:
            for _ in range(20):
                got.append(await line.get())
                line.task_done()
                if len(got) % 7 == 0:
                    await asyncio.sleep(0)

        reading = asyncio.create_task(reader())
        for n in range(20):
            await line.put(n)
        await reading
        return got

    assert asyncio.run(run()) == list(range(20))


def test_a_full_line_holds_the_writer_until_a_frame_is_taken() -> None:
    async def run() -> None:
        line = FrameLine(2)
        await line.put("a")
        await line.put("b")
        third = asyncio.create_task(line.put("c"))
        await asyncio.sleep(0.01)
        assert not third.done()
        assert line.qsize() == 2
        assert await line.get() == "a"
        await asyncio.wait_for(third, 1)
        assert [await line.get(), await line.get()] == ["b", "c"]

    asyncio.run(run())


def test_an_unbounded_line_never_holds_the_writer() -> None:
    async def run() -> int:
        line = FrameLine(0)
        for n in range(1000):
            await asyncio.wait_for(line.put(n), 1)
        return line.qsize()

    assert asyncio.run(run()) == 1000


def test_a_cancelled_wait_leaves_the_line_working() -> None:
    """A channel's reader is cancelled in its wait when the channel closes; a later reader
    and the writer go on as if it had never waited."""

    async def run() -> str:
        line = FrameLine(1)
        waiting = asyncio.create_task(line.get())
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        await line.put("frame")
        blocked = asyncio.create_task(line.put("next"))
        await asyncio.sleep(0)
        blocked.cancel()
        await asyncio.gather(blocked, return_exceptions=True)
        got = await asyncio.wait_for(line.get(), 1)
        await asyncio.wait_for(line.put("after"), 1)
        return f"{got} {await asyncio.wait_for(line.get(), 1)}"

    assert asyncio.run(run()) == "frame after"
