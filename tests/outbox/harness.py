# SPDX-License-Identifier: MIT
"""One outbox set-up for a test: a SQL store (the application's database), a target
connection, the config file that ties them, and ways to read both sides.

The store's and the target's URLs come from the contract suite's backends, so
each test works in a namespace of its own on the real services and leaves
nothing behind.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO

from rainier_queue.connections import QueueConfig
from rainier_queue.outbox import Outbox, Relay
from rainier_queue.queue import Countable, Queue

from ..app_transactions import AppTransaction
from ..contract.backends import BACKENDS
from .application import execute, open_app

REPO = Path(__file__).resolve().parents[2]

OUTBOX_LEASE = "3s"
"""How soon rows a killed relay held are taken by the next: short, so the test is short,
and long enough that a live relay on a loaded machine finishes its batch inside it."""


@dataclass
class Setup:
    store: str
    target: str
    tmp: Path
    namespace: str
    config: Path
    table: str

    @property
    def store_url(self) -> str:
        return BACKENDS[self.store].url(self.tmp, f"{self.namespace}ob")

    def open_config(self) -> QueueConfig:
        config = QueueConfig.load(self.config)
        assert config is not None
        return config

    async def app(self) -> AppTransaction:
        return await open_app(self.store, self.tmp / "queue.db")

    def outbox(self) -> Outbox:
        outbox = self.open_config().open_outbox("default")
        assert outbox is not None
        return outbox

    def target_queue(self) -> Queue:
        return self.open_config().open("default")

    def cli(
        self, *args: str, stdout: int | IO[bytes] = subprocess.DEVNULL
    ) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "rainier_queue", "--config", str(self.config), *args],
            cwd=REPO,
            stdout=stdout,
            stderr=subprocess.PIPE,
        )


@asynccontextmanager
async def outbox_setup(
    store: str, target: str, tmp: Path, *, lease: str = OUTBOX_LEASE
) -> AsyncIterator[Setup]:
    """A store and a target in namespaces of this test's own, removed afterwards; `lease`
    is the outbox's (how long a relay holds the rows it claimed)."""
    for name in (store, target):
        check = BACKENDS[name].check
        if check is not None:
            check()
    namespace = "rq" + uuid.uuid4().hex[:10]
    setup = Setup(store, target, tmp, namespace, tmp / "rainier-queue.toml", f"{namespace}_orders")
    target_url = BACKENDS[target].url(tmp, namespace)
    BACKENDS[target].setup(tmp, namespace, ["default"])
    setup.config.write_text(
        "[connections.default]\n"
        f'url = "{target_url}"\n'
        f'outbox = {{ url = "{setup.store_url}", lease = "{lease}" }}\n',
        encoding="utf-8",
    )
    outbox = setup.outbox()
    await outbox.provision()
    await outbox.aclose()
    app = await setup.app()
    try:
        await execute(app, f"CREATE TABLE {setup.table} (n INTEGER PRIMARY KEY)")
        await app.commit()
    finally:
        await app.close()
    try:
        yield setup
    finally:
        app = await setup.app()
        try:
            await execute(app, f"DROP TABLE IF EXISTS {setup.table}")
            await app.commit()
        finally:
            await app.close()
        for name, ns in ((store, f"{namespace}ob"), (target, namespace)):
            cleanup = BACKENDS[name].cleanup
            if cleanup is not None:
                await cleanup(tmp, ns)


async def committed_orders(setup: Setup) -> set[int]:
    """What the application committed: its orders table."""
    app = await setup.app()
    try:
        if app.kind == "sqlite":
            rows = app.connection.execute(f"SELECT n FROM {setup.table}").fetchall()
        elif app.kind == "mysql":
            async with app.connection.cursor() as cur:
                await cur.execute(f"SELECT n FROM {setup.table}")
                rows = await cur.fetchall()
        else:
            rows = await (await app.connection.execute(f"SELECT n FROM {setup.table}")).fetchall()
        return {int(row[0]) for row in rows}
    finally:
        await app.close()


async def outbox_left(setup: Setup) -> int:
    """Rows still in the outbox, held by a relay or not."""
    outbox = setup.outbox()
    try:
        assert isinstance(outbox.store, Countable)
        return (await outbox.store.counts("default")).total
    finally:
        await outbox.aclose()


async def relay_everything(setup: Setup, *, within: float = 120.0) -> None:
    """Relay in this process until the outbox is empty, rows a killed relay held included
    (they come back when their lease lapses)."""
    outbox = setup.outbox()
    target = setup.target_queue()
    relay = Relay(outbox, target)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    try:
        assert isinstance(outbox.store, Countable)
        while (await outbox.store.counts("default")).total:
            assert loop.time() < deadline, "the outbox did not empty"
            if not await relay.drain():
                await asyncio.sleep(0.2)  # rows a dead relay holds: their lease is lapsing
    finally:
        await target.aclose()
        await outbox.aclose()


async def arrived(setup: Setup, expect: set[int], *, within: float = 120.0) -> Counter[int]:
    """Every job on the target, by order number, with how often it arrived: read (and
    acknowledged, so a log moves past each one) until each of `expect` came and a read
    then finds nothing more."""
    target = setup.target_queue()
    seen: Counter[int] = Counter()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    try:
        while True:
            got = await target.reserve("default", limit=500)
            if not got:
                if expect <= seen.keys():
                    return seen
                assert loop.time() < deadline, (
                    f"missing on the target: {sorted(expect - seen.keys())[:20]}"
                )
                await target.wait_for_work(["default"], timedelta(milliseconds=200))
                continue
            for reservation in got:
                payload = reservation.job.payload
                assert isinstance(payload, dict)
                seen[int(str(payload["order"]))] += 1
            outcomes = await target.acknowledge_many(got)
            assert not any(outcomes), outcomes
    finally:
        await target.aclose()


@contextmanager
def killed_at_exit(*processes: subprocess.Popen[bytes]) -> Iterator[None]:
    """Whatever happens in the test, no process it started outlives it."""
    try:
        yield
    finally:
        for process in processes:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
            process.wait()
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
