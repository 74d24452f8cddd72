# SPDX-License-Identifier: MIT
"""How many jobs a second do outbox relays move from a SQL outbox to a target?

Asked when the outbox was added (docs/outbox.md cites the answer). Each round
writes `--jobs` outbox rows (in transactions of 1,000, as an application's
commits would, through the store's own connection: what the relay pays does
not depend on whose connection wrote the rows), then starts `--relays` CLI
relay processes (`rainier-queue relay --batch N`) and times them from start
until the outbox is empty, process start-up included. The target's queue is
cleared after each round; the outbox tables (prefix `rqbench...`) are left for
the caller to drop.

    .venv/bin/python -m bench.studies.outbox_relay \\
        --store 'postgresql://postgres@127.0.0.1:5432/test' --target redis://127.0.0.1:6379/0 \\
        --relays 1 --relays 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from rainier_queue.connections import QueueConfig, open_queue
from rainier_queue.envelope import QueuedJob
from rainier_queue.outbox import outbox_row
from rainier_queue.queue import Countable, Provisionable

PER_COMMIT = 1_000


def _with_prefix(url: str, prefix: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}prefix={prefix}"


async def one_round(store: str, target: str, jobs: int, relays: int, batch: int) -> float:
    """Jobs per second through `relays` relay processes, for one outbox of `jobs` rows."""
    prefix = "rqbench" + uuid.uuid4().hex[:8] + "_"
    store_url = _with_prefix(store, prefix)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "rainier-queue.toml"
        config.write_text(
            f'[connections.default]\nurl = "{target}"\noutbox = "{store_url}"\n', encoding="utf-8"
        )
        loaded = QueueConfig.load(config)
        assert loaded is not None
        outbox = loaded.open_outbox("default")
        assert outbox is not None
        assert isinstance(outbox.store, Countable)
        for start in range(0, jobs, PER_COMMIT):
            rows = [
                outbox_row(QueuedJob.create("bench-noop", {"n": n}), "default")
                for n in range(start, min(jobs, start + PER_COMMIT))
            ]
            await outbox.store.push_many(rows)
        landing = open_queue(target)
        if isinstance(landing, Provisionable):
            await landing.provision(["default"])  # a topic or a stream, where a push makes none
        command = [sys.executable, "-m", "rainier_queue", "--config", str(config)]
        began = time.perf_counter()
        processes = [
            await asyncio.to_thread(
                subprocess.Popen,
                [*command, "relay", "--batch", str(batch)],
                stdout=subprocess.DEVNULL,
            )
            for _ in range(relays)
        ]
        try:
            # A poll of the outbox: nothing signals that it is empty.
            while (await outbox.store.counts("default")).total:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
            took = time.perf_counter() - began
        finally:
            for process in processes:
                os.kill(process.pid, signal.SIGTERM)
            for process in processes:
                process.wait()
        await outbox.aclose()
        await landing.clear("default")
        await landing.aclose()
    return jobs / took


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--store", required=True, help="the SQL database holding the outbox")
    parser.add_argument("--target", required=True, help="the connection the relays push to")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--relays", type=int, action="append", help="relay processes (repeat)")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    for relays in args.relays or [1, 2]:
        for _ in range(args.rounds):
            rate = await one_round(args.store, args.target, args.jobs, relays, args.batch)
            print(f"{relays} relay(s), batch {args.batch}: {rate:,.0f} jobs/s", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
