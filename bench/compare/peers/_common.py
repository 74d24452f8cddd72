# SPDX-License-Identifier: MIT
"""The harness every adapter runs under: stdlib and redis-py only, so it loads in both venvs.

An adapter module subclasses `Adapter` and calls `main(MyAdapter)`. The harness
sets up, times the bulk enqueue, starts the workers, waits until the per-run
Redis counter reaches N, checks that it stays at N, stops the workers, tears
down, and prints one JSON line on stdout for `bench.compare.run`.

The workers of every system import this module too (for the counter's key
and address), so redis-py is imported only inside the harness's own runs:
at the top it cost each worker about 75 ms of CPU at start-up, the same
fixed time for everyone, which pulled every short run's ratio toward 1.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from ..latency_check import OUT_ENV, WARM_UP, read_latencies, summary
from ..proccpu import CpuWindow
from ..procmem import RssSampler

ROOT = Path(__file__).resolve().parents[3]
REDIS_URL = "redis://127.0.0.1:6379/0"
PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"
MYSQL_DSN = "mysql://root@127.0.0.1:3306/test"
NATS_URL = "nats://127.0.0.1:4222"
AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
KEY_ENV = "RQCOMPARE_KEY"
TAG_ENV = "RQCOMPARE_TAG"
BACKEND_ENV = "RQCOMPARE_BACKEND"  # for adapters that serve more than one backend
SLEEP_ENV = "RQCOMPARE_SLEEP_MS"  # the I/O-bound workload: each job awaits a sleep this long
ENQUEUE_ENV = "RQCOMPARE_ENQUEUE"  # ours only: "push_many" (default) or "dispatch_many"
WORKLOAD_ENV = "RQCOMPARE_WORKLOAD"  # for an adapter whose workers are set up per workload
MODE_ENV = "RQCOMPARE_MODE"  # a peer run in several modes (bench/compare/modes.py): which one
SETTLE = 0.5  # seconds the counter must stay at N once reached
STEADY = (0.1, 0.9)  # steady state: the rate between these fractions of N, past start-up and tail


class Steady:
    """When the counter first reached 10% and 90% of N: the rate in between is the steady state."""

    def __init__(self, jobs: int) -> None:
        self.marks = [max(1, int(jobs * f)) for f in STEADY]
        self.times: list[float | None] = [None, None]

    def poll(self, count: int, now: float) -> None:
        for i, mark in enumerate(self.marks):
            if self.times[i] is None and count >= mark:
                self.times[i] = now

    def seconds(self) -> tuple[int, float] | None:
        """(jobs, seconds) between the two marks, if both were seen far enough apart."""
        low, high = self.times
        if low is None or high is None or high - low < 0.05:
            return None
        return self.marks[1] - self.marks[0], high - low


class Marks:
    """When the counter first reached each fraction of N: drain rates at the start and the end.

    A drain that slows as it goes (an index growing dead entries at its head,
    a table bloating) shows as an end rate below the start rate; the steady
    rate alone averages the two.
    """

    FRACTIONS = (0.01, 0.1, 0.9, 1.0)

    def __init__(self, jobs: int) -> None:
        self.marks = [max(1, int(jobs * f)) for f in self.FRACTIONS]
        self.times: list[float | None] = [None] * len(self.marks)

    def poll(self, count: int, now: float) -> None:
        for i, mark in enumerate(self.marks):
            if self.times[i] is None and count >= mark:
                self.times[i] = now

    def rates(self) -> dict[str, float]:
        """jobs/s between 1% and 10% of N (start) and between 90% and 100% (end)."""
        out: dict[str, float] = {}
        for key, (a, b) in (("start_jobs_s", (0, 1)), ("end_jobs_s", (2, 3))):
            ta, tb = self.times[a], self.times[b]
            if ta is not None and tb is not None and tb - ta >= 0.05:
                out[key] = round((self.marks[b] - self.marks[a]) / (tb - ta), 1)
        return out


def counter_key() -> str:
    return os.environ[KEY_ENV]


def tag() -> str:
    return os.environ[TAG_ENV]


def mode(choices: tuple[str, ...]) -> str:
    """The run's mode of a peer with several (`MODE_ENV`); the first of `choices` if none is set."""
    chosen = os.environ.get(MODE_ENV) or choices[0]
    if chosen not in choices:
        raise SystemExit(f"no mode {chosen!r} here; choose one of {', '.join(choices)}")
    return chosen


def bin_of(name: str) -> str:
    """A console script of the venv the adapter runs in."""
    return str(Path(sys.executable).parent / name)


class Adapter:
    backend = ""

    def __init__(
        self, jobs: int, processes: int, concurrency: int, backend: str, workload: str = ""
    ) -> None:
        self.backend = backend or self.backend
        self.jobs = jobs
        self.processes = processes
        self.concurrency = concurrency
        self.workload = workload or "throughput"

    def setup(self) -> None:
        """Create schema / clear keys."""

    def enqueue(self) -> float | None:
        """Enqueue `self.jobs` jobs with the system's bulk API; return the seconds it took.

        None: the worker process enqueues for itself (the in-process memory driver)."""
        raise NotImplementedError

    def worker_commands(self) -> list[list[str]]:
        """One command per worker process (or one that forks the workers itself)."""
        raise NotImplementedError

    def teardown(self) -> None:
        """Drop schema / delete keys."""

    def after_drain(self) -> dict[str, Any]:
        """What is worth reporting about the store once every job ran (sizes left behind)."""
        return {}

    def push_one(self, seq: int, pushed_at: float) -> None:
        """Latency workload: push one job that calls `latency_check.record(seq, pushed_at)`.

        Called with an idle worker running; an adapter without it has no latency row."""
        raise NotImplementedError

    def close(self) -> None:
        """Latency workload: release what `push_one` opened (a client, an event loop)."""

    notes = ""


def _stop(procs: list[subprocess.Popen[bytes]], grace: float = 15.0) -> None:
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for proc in procs:  # children a worker forked and left behind
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def run(adapter_cls: type[Adapter], args: argparse.Namespace) -> dict[str, Any]:
    key = f"rqcompare:{args.tag}:count"
    os.environ[KEY_ENV] = key
    os.environ[TAG_ENV] = args.tag
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    import redis  # here, not at the top: every system's workers import this module

    client = redis.Redis.from_url(REDIS_URL)
    client.delete(key)
    adapter = adapter_cls(args.jobs, args.processes, args.concurrency, args.backend, args.workload)
    result: dict[str, Any] = {"ok": False, "jobs": args.jobs}
    procs: list[subprocess.Popen[bytes]] = []
    log = tempfile.NamedTemporaryFile(prefix="rqcompare-", suffix=".log", delete=False)  # noqa: SIM115
    try:
        adapter.setup()
        result["enqueue_s"] = adapter.enqueue()
        if args.workload == "enqueue":  # the bulk enqueue alone; nothing is worked
            result["ok"] = result["enqueue_s"] is not None
            if not result["ok"]:
                result["error"] = "this adapter has no separate enqueue on this backend"
            return result
        commands = adapter.worker_commands()
        started = time.perf_counter()
        procs = [
            subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log, start_new_session=True)
            for cmd in commands
        ]
        sampler = RssSampler([p.pid for p in procs]) if args.rss else None
        steady = Steady(args.jobs)
        marks = Marks(args.jobs)
        cpu = CpuWindow([p.pid for p in procs], adapter.backend, steady.marks)
        deadline = time.monotonic() + args.timeout
        count = 0
        while True:
            count = int(client.get(key) or 0)
            steady.poll(count, time.perf_counter())
            marks.poll(count, time.perf_counter())
            cpu.poll(count)
            if count and "first_job_s" not in result:
                result["first_job_s"] = time.perf_counter() - started
            if sampler is not None:
                sampler.poll(count)
            if count >= args.jobs:
                break
            if time.monotonic() > deadline:
                result["error"] = f"timed out at {count}/{args.jobs}"
                break
            if all(p.poll() is not None for p in procs):
                count = int(client.get(key) or 0)
                if count < args.jobs:
                    codes = [p.returncode for p in procs]
                    result["error"] = f"workers exited {codes} at {count}/{args.jobs}"
                break
            time.sleep(0.005)
        result["drain_s"] = time.perf_counter() - started
        if (window := steady.seconds()) is not None:
            result["steady_jobs"], result["steady_s"] = window
        result.update(cpu.summary())
        result.update(marks.rates())
        if sampler is not None:
            sampler.finish()
            result.update(sampler.summary())
        time.sleep(SETTLE)
        count = int(client.get(key) or 0)
        result["counter"] = count
        if count != args.jobs and "error" not in result:
            result["error"] = f"counter is {count}, expected {args.jobs}"
        result["ok"] = "error" not in result
        _stop(procs)
        if result["ok"]:
            result.update(adapter.after_drain())
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    finally:
        _stop(procs)
        try:
            adapter.teardown()
        except Exception:
            traceback.print_exc()
        client.delete(key)
        client.close()
        log.close()
        if not result["ok"]:
            tail = Path(log.name).read_text(errors="replace")[-3000:]
            print(f"--- worker log {log.name} ---\n{tail}", file=sys.stderr)
        else:
            os.unlink(log.name)
    return result


READY_TIMEOUT = 60.0  # for the warm-up job: the worker is up once it has run


def _wait_for(path: Path, want: set[int], timeout: float, procs: list[Any]) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if want <= read_latencies(path).keys():
            return True
        if all(p.poll() is not None for p in procs):
            return False
        time.sleep(0.02)
    return False


def run_latency(adapter_cls: type[Adapter], args: argparse.Namespace) -> dict[str, Any]:
    """Idle worker, jobs pushed one at a time at `args.rate`/s: push-to-start percentiles.

    The same steps as ours (bench/latency.py): one worker process, one warm-up
    job, 0.5 s to fall idle again, then `args.jobs` jobs on a schedule that does
    not drift, and an exact count of the lines the jobs wrote.
    """
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    out_dir = tempfile.mkdtemp(prefix="rqcompare-latency-")
    path = Path(out_dir) / "samples.txt"
    os.environ[OUT_ENV] = str(path)
    os.environ[KEY_ENV] = f"rqcompare:{args.tag}:count"  # unused by latency jobs; set for imports
    adapter = adapter_cls(args.jobs, 1, args.concurrency, args.backend, "latency")
    result: dict[str, Any] = {"ok": False, "expected": args.jobs, "samples": 0}
    procs: list[subprocess.Popen[bytes]] = []
    log = tempfile.NamedTemporaryFile(prefix="rqcompare-", suffix=".log", delete=False)  # noqa: SIM115
    try:
        adapter.setup()
        procs = [
            subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log, start_new_session=True)
            for cmd in adapter.worker_commands()
        ]
        adapter.push_one(WARM_UP, time.time())
        if not _wait_for(path, {WARM_UP}, READY_TIMEOUT, procs):
            raise RuntimeError(f"the worker did not start a job within {READY_TIMEOUT:.0f}s")
        time.sleep(0.5)  # let it settle back into its idle wait
        start = time.monotonic()
        for seq in range(args.jobs):
            delay = start + seq / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            adapter.push_one(seq, time.time())
        _wait_for(path, set(range(args.jobs)), args.jobs / args.rate + 30, procs)
        time.sleep(SETTLE)  # a late double start shows up here
        result.update(summary(path, args.jobs))
    except NotImplementedError:
        result["error"] = "this adapter has no latency run"
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    finally:
        _stop(procs)
        for step in (adapter.close, adapter.teardown):
            try:
                step()
            except Exception:
                traceback.print_exc()
        log.close()
        if not result["ok"]:
            tail = Path(log.name).read_text(errors="replace")[-3000:]
            print(f"--- worker log {log.name} ---\n{tail}", file=sys.stderr)
        else:
            os.unlink(log.name)
        with contextlib.suppress(OSError):
            path.unlink()
        with contextlib.suppress(OSError):
            os.rmdir(out_dir)
    return result


def main(adapter_cls: type[Adapter]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--backend", default="", help="for adapters that serve more than one")
    parser.add_argument(
        "--workload",
        default="throughput",
        choices=["throughput", "memory", "latency", "enqueue"],
    )
    parser.add_argument("--sleep-ms", type=float, default=0.0, help="I/O-bound: each job sleeps")
    parser.add_argument(
        "--enqueue", default="push_many", help="ours: push_many or dispatch_many [%(default)s]"
    )
    parser.add_argument("--rate", type=float, default=50.0, help="latency: jobs pushed per second")
    parser.add_argument("--rss", action="store_true", help="sample the workers' resident memory")
    args = parser.parse_args()
    # Module-level names (queue names, the backend) are read from the environment at import.
    os.environ[TAG_ENV] = args.tag
    os.environ[SLEEP_ENV] = str(args.sleep_ms)
    os.environ[ENQUEUE_ENV] = args.enqueue
    os.environ[WORKLOAD_ENV] = args.workload
    if args.backend:
        os.environ[BACKEND_ENV] = args.backend
    if adapter_cls.__module__ == "__main__":
        # Run with -m, the module is __main__: import it again under its real name so
        # that the tasks it registers are named as the workers will import them.
        spec = sys.modules["__main__"].__spec__
        assert spec is not None, "run adapters with python -m"
        real = spec.name
        adapter_cls = getattr(importlib.import_module(real), adapter_cls.__name__)
    runner = run_latency if args.workload == "latency" else run
    print(json.dumps(runner(adapter_cls, args)), flush=True)
