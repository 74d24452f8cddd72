# SPDX-License-Identifier: MIT
"""A peer's serious modes, run side by side, so that ours is compared with the faster one.

Some peers run jobs in two ways their documentation presents as real
choices: Huey's consumer forks worker processes or starts threads, and
Celery's worker runs a prefork pool or a thread pool. Which wins depends
on the workload (short jobs that spend their time in Python favour
processes; jobs that wait favour threads), so a ratio against one of them
alone may be a ratio against the slow one, which is not a margin. Each
mode is therefore its own system, named `peer/mode` ("huey/process"), run
and reported like any other; the fastest peer on a backend is the fastest
row over every peer's every mode, and a peer's slower mode is marked as
such in the tables.

An adapter learns its mode from `_common.MODE_ENV`, which
`adapters.run_adapter` sets from the system's name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

SEP = "/"
MODES: dict[str, tuple[str, ...]] = {
    "huey": ("process", "thread"),
    "celery": ("prefork", "threads"),
}
"""Every peer with more than one serious mode, its documented default for throughput first."""

MODE_NAMES = {
    "process": "process workers",
    "thread": "thread workers",
    "prefork": "prefork pool",
    "threads": "thread pool",
}

Row = dict[str, Any]


def peer_of(system: str) -> str:
    """The peer a system belongs to: "huey" for "huey/process", the name itself otherwise."""
    return system.split(SEP, 1)[0]


def mode_of(system: str) -> str:
    """The mode in a system's name ("process" for "huey/process"), or "" for a peer with one."""
    _, _, mode = system.partition(SEP)
    return mode


def expand(systems: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """(system, backend, module) triples with every moded peer replaced by one per mode."""
    out: list[tuple[str, str, str]] = []
    for system, backend, module in systems:
        modes = MODES.get(system, ())
        out += [(f"{system}{SEP}{m}", backend, module) for m in modes] or [
            (system, backend, module)
        ]
    return out


def selected(system: str, only: Sequence[str]) -> bool:
    """Whether `--only` picks `system`: by the peer's name (every mode) or by `peer/mode`."""
    return system in only or peer_of(system) in only


def slower_modes(rows: Sequence[Row], backend: str, key: str = "e2e_jobs_s") -> dict[str, str]:
    """{slower mode's system: the faster mode's system} for each peer run in several modes.

    Only modes that finished every run with a number count; a FAILED mode is
    never the faster one, and a peer with one such mode left has no slower mode.
    """
    best: dict[str, Row] = {}
    ran: dict[str, list[Row]] = {}
    for r in rows:
        if r["backend"] != backend or not mode_of(r["system"]):
            continue
        peer = peer_of(r["system"])
        ran.setdefault(peer, []).append(r)
        if r["ok"] and r.get(key) and (peer not in best or r[key] > best[peer][key]):
            best[peer] = r
    out: dict[str, str] = {}
    for peer, group in ran.items():
        winner = best.get(peer)
        if winner is None:
            continue
        out |= {
            r["system"]: winner["system"]
            for r in group
            if r["system"] != winner["system"] and r["ok"] and r.get(key)
        }
    return out


__all__ = ["MODES", "MODE_NAMES", "expand", "mode_of", "peer_of", "selected", "slower_modes"]
