# SPDX-License-Identifier: MIT
"""`Supervisor`: several worker processes, kept running, stopped together.

One asyncio worker uses one core. To use more, run more processes; and a
process that dies (an out-of-memory kill, a handler that segfaults an
extension) should come back without an operator. The supervisor does that
and nothing else: it starts `processes` copies of a command, restarts one
that dies unexpectedly (waiting longer after each crash in a row, up to a
cap, so a worker that cannot start does not spin), and leaves alone one
whose exit code says it finished on purpose (`finished_codes`: 0 by
default, as after `--stop-when-empty` or `--max-jobs`).

Signals: the first SIGTERM or SIGINT is passed on to every child, which
stops gracefully; a second one kills them. The children run in their own
process groups, so a Ctrl-C in a terminal reaches them once, through the
supervisor, and not a second time straight from the terminal (which they
would read as "stop now"). The cost: if the supervisor itself is killed
with SIGKILL, its children keep running until they are stopped.

The exit code is something a service manager can act on: 0 when every
child's last run ended cleanly, else the worst of their codes (a child
killed by signal N counts as 128 + N, as a shell reports it).
"""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from types import FrameType
from typing import Any, TypeAlias

log = logging.getLogger("rainier_queue.worker")

_Handler: TypeAlias = Callable[[int, FrameType | None], Any] | int | None

POLL_SECONDS = 0.1
"""How often children are looked at when nothing else wakes the supervisor."""


@dataclass(eq=False)
class _Child:
    """One of the N process slots."""

    index: int
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    crashes: int = 0
    """Crashes in a row; reset by a run that lasted longer than the backoff cap."""
    restart_at: float | None = None
    last_code: int | None = None
    done: bool = False


class Supervisor:
    """Runs `processes` copies of `command`, restarting the ones that crash."""

    def __init__(
        self,
        command: Sequence[str],
        processes: int,
        *,
        env: Mapping[str, str] | None = None,
        restart_backoff: timedelta = timedelta(seconds=1),
        max_restart_backoff: timedelta = timedelta(seconds=60),
        finished_codes: Collection[int] = (0,),
        on_exit: Callable[[int], None] | None = None,
    ) -> None:
        if not command:
            raise ValueError("the supervisor needs a command to run")
        if processes < 1:
            raise ValueError("the supervisor needs at least one process")
        self.command = list(command)
        self.processes = processes
        self.env = dict(env) if env is not None else None
        """The children's whole environment; None: this process's."""
        self.restart_backoff = restart_backoff
        self.max_restart_backoff = max(max_restart_backoff, restart_backoff)
        self.finished_codes = frozenset(finished_codes)
        """Exit codes that mean the child ended on purpose and is not restarted:
        0 by default; the CLI adds "a job failed" and "bad configuration", since a
        finished run should stay finished and a restart cannot fix a config."""
        self.on_exit = on_exit
        """Called with a child's pid once it has exited, before any restart (the metrics
        of a multi-process worker forget the live values of a process that is gone)."""
        self._signals: list[int] = []
        self._wake = threading.Event()
        self._stopping = False
        self._killed = False

    def run(self) -> int:
        """Run until every child has finished or been stopped; the exit code to report."""
        previous = self._install_handlers()
        children = [_Child(index=i) for i in range(self.processes)]
        try:
            for child in children:
                self._spawn(child)
            while not all(child.done for child in children):
                self._handle_signals(children)
                for child in children:
                    self._look_after(child)
                self._wake.wait(POLL_SECONDS)
                self._wake.clear()
        except BaseException:
            self._kill(children)
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        codes = [_exit_code(child.last_code) for child in children]
        worst = max(codes, default=0)
        log.info("every worker process has ended; exit code %d", worst)
        return worst

    def stop(self) -> None:
        """Ask the children to stop, as a first SIGTERM would. Safe from any thread."""
        self._signals.append(signal.SIGTERM)
        self._wake.set()

    # -- children --------------------------------------------------------------------

    def _spawn(self, child: _Child) -> None:
        child.process = subprocess.Popen(
            self.command,
            env=self.env,
            stdin=subprocess.DEVNULL,
            process_group=0,
        )
        child.started_at = time.monotonic()
        child.restart_at = None
        log.info("started worker process %d (pid %d)", child.index, child.process.pid)

    def _look_after(self, child: _Child) -> None:
        if child.done:
            return
        now = time.monotonic()
        if child.process is not None:
            code = child.process.poll()
            if code is None:
                return
            if self.on_exit is not None:
                try:
                    self.on_exit(child.process.pid)
                except Exception:
                    log.exception("the exit hook failed for worker process %d", child.index)
            child.process = None
            child.last_code = code
            if self._stopping:
                child.done = True
            elif code in self.finished_codes:
                log.info(
                    "worker process %d ended (%s); not restarting it",
                    child.index,
                    _describe_code(code),
                )
                child.done = True
            else:
                if now - child.started_at >= self.max_restart_backoff.total_seconds():
                    child.crashes = 0
                child.crashes += 1
                delay = self._restart_delay(child.crashes)
                log.warning(
                    "worker process %d exited with %s; restarting it in %gs",
                    child.index,
                    _describe_code(code),
                    delay,
                )
                child.restart_at = now + delay
            return
        if self._stopping:
            child.done = True
        elif child.restart_at is not None and now >= child.restart_at:
            self._spawn(child)

    def _restart_delay(self, crashes: int) -> float:
        base = self.restart_backoff.total_seconds()
        growth: float = 2.0 ** min(crashes - 1, 16)
        return min(base * growth, self.max_restart_backoff.total_seconds())

    def _alive(self, children: list[_Child]) -> list[subprocess.Popen[bytes]]:
        return [c.process for c in children if c.process is not None and c.process.poll() is None]

    def _kill(self, children: list[_Child]) -> None:
        for process in self._alive(children):
            process.kill()
        for child in children:
            if child.process is not None:
                child.process.wait()

    # -- signals ---------------------------------------------------------------------

    def _install_handlers(self) -> dict[signal.Signals, _Handler]:
        previous: dict[signal.Signals, _Handler] = {}
        if threading.current_thread() is not threading.main_thread():
            log.warning("the supervisor is not on the main thread; it cannot handle signals")
            return previous
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, self._on_signal)
        return previous

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals.append(signum)
        self._wake.set()

    def _handle_signals(self, children: list[_Child]) -> None:
        while self._signals:
            signum = self._signals.pop(0)
            name = signal.Signals(signum).name
            if not self._stopping:
                self._stopping = True
                log.info("received %s: asking every worker process to stop", name)
                for process in self._alive(children):
                    process.send_signal(signum)
            elif not self._killed:
                self._killed = True
                log.warning("received %s again: killing every worker process", name)
                for process in self._alive(children):
                    process.kill()


def _exit_code(code: int | None) -> int:
    if code is None:
        return 0
    return 128 - code if code < 0 else code


def _describe_code(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


__all__ = ["Supervisor"]
