# SPDX-License-Identifier: MIT
"""Does a Redis job cost more behind a deep backlog? Two queues, one deep, one shallow, in turns.

Comparing the start of a long drain with its end compares two moments of a
shared machine, and CPU time per operation moves with the machine's load
(caches, the other core's work). Here one process works two queues of the
same Redis in alternating slices, a deep one (`--deep` jobs) and a shallow
one (`--shallow`), so both see the same load, and sums per queue: the
server's CPU per job (`INFO cpu`), its microseconds per command (`INFO
commandstats`) and this process's CPU per job, each slice being reserves
and acknowledgements (`acknowledge_and_reserve`, as a worker does) of
`--batch` jobs at a time. A cost that grows with the backlog shows as the
deep queue's figure above the shallow one's.

    .venv/bin/python -m bench.studies.redis_deep_vs_shallow --url 'redis://127.0.0.1:6390/0?prefix=dvs:'
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict

import redis

from rainier_queue import QueuedJob
from rainier_queue.connections import open_queue
from rainier_queue.queue import Queue, Reservation


def server(client: redis.Redis) -> tuple[float, dict[str, tuple[int, float]]]:
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), {
        name.removeprefix("cmdstat_"): (int(v["calls"]), float(v["usec"]))
        for name, v in stats.items()
    }


async def fill(queue: Queue, name: str, count: int) -> None:
    for start in range(0, count, 5000):
        jobs = [
            QueuedJob.create("bench-noop", {"n": n}, queue=name, max_attempts=1)
            for n in range(start, min(count, start + 5000))
        ]
        await queue.push_many(jobs)


async def slice_of(queue: Queue, name: str, cycles: int, batch: int) -> int:
    held: list[Reservation] = await queue.reserve(name, limit=batch)
    done = 0
    for _ in range(cycles):
        outcomes, held_next = await queue.acknowledge_and_reserve(held, name, limit=batch)
        done += sum(1 for o in outcomes if o is None)
        held = held_next
    await queue.acknowledge_many(held)
    return done + len(held)


async def run(args: argparse.Namespace) -> None:
    client = redis.Redis.from_url(args.url.split("?", 1)[0])
    queue = open_queue(args.url)
    sizes = {"deep": args.deep, "shallow": args.shallow}
    try:
        for name, size in sizes.items():
            await fill(queue, name, size)
        server_s: dict[str, float] = defaultdict(float)
        client_s: dict[str, float] = defaultdict(float)
        jobs: dict[str, int] = defaultdict(int)
        commands: dict[str, dict[str, list[float]]] = defaultdict(
            lambda: defaultdict(lambda: [0, 0.0])
        )
        for _ in range(args.rounds):
            for name in sizes:
                cpu0, stats0 = server(client)
                t0 = time.process_time()
                jobs[name] += await slice_of(queue, name, args.cycles, args.batch)
                client_s[name] += time.process_time() - t0
                cpu1, stats1 = server(client)
                server_s[name] += cpu1 - cpu0
                for command, (calls, usec) in stats1.items():
                    c0, u0 = stats0.get(command, (0, 0.0))
                    commands[name][command][0] += calls - c0
                    commands[name][command][1] += usec - u0
        print(f"{'':22}{'deep':>14}{'shallow':>14}")
        print(f"{'backlog':22}{args.deep:>14,}{args.shallow:>14,}")
        print(f"{'jobs worked':22}{jobs['deep']:>14,}{jobs['shallow']:>14,}")
        for label, table in (("server CPU us/job", server_s), ("client CPU us/job", client_s)):
            row = [table[n] / jobs[n] * 1e6 for n in sizes]
            print(f"{label:22}{row[0]:>14.1f}{row[1]:>14.1f}")
        print("per command, us/call (deep, shallow):")
        for command in sorted(commands["deep"]):
            d, s = commands["deep"][command], commands["shallow"].get(command, [0, 0.0])
            if d[0] and s[0] and command not in ("info",):
                print(f"  {command:20}{d[1] / d[0]:>14.2f}{s[1] / s[0]:>14.2f}")
    finally:
        await queue.aclose()
        prefix = args.url.split("prefix=", 1)[1].split("&", 1)[0]
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deep", type=int, default=1_000_000)
    parser.add_argument("--shallow", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--cycles", type=int, default=200, help="reserves per slice")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--url", default="redis://127.0.0.1:6379/0?prefix=deep_vs_shallow:")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
