# SPDX-License-Identifier: MIT
"""Procrastinate adapter: `Task.batch_defer_async` (its bulk API), `procrastinate worker` CLI.

Procrastinate has one worker model (asyncio, `--concurrency` jobs per
worker) and wakes on LISTEN/NOTIFY (its default); its documentation names
no other switch for speed, so the rest are its defaults.

The schema lives in a PostgreSQL schema of its own (via `search_path`), dropped afterwards.
"""

from __future__ import annotations

import asyncio
import os
import time

import psycopg
from procrastinate import App, PsycopgConnector

from ..latency_check import record
from ._async import incr_counter
from ._common import PG_DSN, TAG_ENV, Adapter, bin_of, main

BATCH = 1000
SCHEMA = f"rqcmp_proc_{os.environ.get(TAG_ENV, 'none')}"

app = App(
    connector=PsycopgConnector(conninfo=PG_DSN, kwargs={"options": f"-c search_path={SCHEMA}"})
)


@app.task(name="compare_incr")
async def incr(n: int) -> None:
    await incr_counter()


@app.task(name="compare_latency")
async def compare_latency(seq: int, pushed_at: float) -> None:
    record(seq, pushed_at)


class ProcrastinateAdapter(Adapter):
    backend = "postgres"
    runner: asyncio.Runner | None = None

    def setup(self) -> None:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{SCHEMA}"')
        asyncio.run(self._apply())

    async def _apply(self) -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    def enqueue(self) -> float:
        return asyncio.run(self._enqueue())

    async def _enqueue(self) -> float:
        async with app.open_async():
            started = time.perf_counter()
            for i in range(0, self.jobs, BATCH):
                chunk = range(i, min(self.jobs, i + BATCH))
                await incr.batch_defer_async(*({"n": n} for n in chunk))
            return time.perf_counter() - started

    def worker_commands(self) -> list[list[str]]:
        command = [
            bin_of("procrastinate"),
            "--app=bench.compare.peers.procrastinate.app",
            "worker",
            "--concurrency",
            str(self.concurrency),
        ]
        return [command] * self.processes

    def push_one(self, seq: int, pushed_at: float) -> None:
        if self.runner is None:
            self.runner = asyncio.Runner()
            self.runner.run(self._open())
        self.runner.run(compare_latency.defer_async(seq=seq, pushed_at=pushed_at))

    async def _open(self) -> None:
        await app.open_async()

    def close(self) -> None:
        if self.runner is not None:
            self.runner.run(app.close_async())
            self.runner.close()

    def teardown(self) -> None:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')


if __name__ == "__main__":
    main(ProcrastinateAdapter)
