# SPDX-License-Identifier: MIT
"""How often is the cancellation of a task that loops over nats-py requests swallowed?

Why it is asked: two NATS tests hung under load (issue 31): a worker whose
`stop(now=True)` never ended, and a draining CLI worker that never exited.
nats-py waits for every request's answer with `asyncio.wait_for`, and on
Python 3.11 `wait_for` returns the answer instead of raising when the
cancellation lands as the answer comes in. A loop around such a request (a
pause watch that reads on a cadence, the driver's delay mover and sweep)
then goes round again, and whoever cancelled it once and awaits it waits
for ever. This measures how often that happens here: a task that reads
stream info in a loop, `--pause` seconds apart (0: back to back), is
cancelled at a random moment `--cycles` times, and a cancellation counts as
swallowed when the task is still running 20 ms later.

    .venv/bin/python -m bench.studies.nats_cancel_swallow --cycles 2000
    .venv/bin/python -m bench.studies.nats_cancel_swallow --cycles 500 --pause 0.02
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import random
import sys

import nats
import nats.js.errors


async def swallowed(url: str, cycles: int, pause: float) -> int:
    client = await nats.connect(url)
    js = client.jetstream()
    count = 0
    try:
        for _ in range(cycles):

            async def reader() -> None:
                while True:
                    with contextlib.suppress(nats.js.errors.NotFoundError):
                        await js.stream_info("rq-study-no-such-stream")
                    if pause:
                        await asyncio.sleep(pause)

            task = asyncio.ensure_future(reader())
            await asyncio.sleep(random.uniform(0.0005, 0.005))
            task.cancel()
            await asyncio.sleep(0.02)
            if not task.done():
                count += 1
                while not task.done():  # end it for the next cycle
                    task.cancel()
                    await asyncio.sleep(0.001)
    finally:
        await client.close()
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="nats://127.0.0.1:4222")
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between reads [0]")
    args = parser.parse_args()
    got = asyncio.run(swallowed(args.url, args.cycles, args.pause))
    client = importlib.metadata.version("nats-py")
    python = sys.version.split()[0]
    print(
        f"{got} of {args.cycles} cancellations swallowed "
        f"(Python {python}, nats-py {client}, pause {args.pause}s)"
    )


if __name__ == "__main__":
    main()
