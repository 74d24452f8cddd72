# SPDX-License-Identifier: MIT
"""How the reports name and print what they show: systems, backends, numbers, bounds.

Shared by the comparison's report and the grid's, so neither imports the
other for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .constants import BACKEND_NAMES, BACKEND_ORDER, DISPLAY, OURS
from .modes import MODE_NAMES, mode_of, peer_of

Row = dict[str, Any]


def system_name(system: str) -> str:
    """How the README names a system (the tables and JSON keep the short key).

    A peer's mode follows its name: "huey/process" is "Huey (process workers)".
    """
    mode = mode_of(system)
    if not mode:
        return DISPLAY.get(system, system)
    peer = peer_of(system)
    return f"{DISPLAY.get(peer, peer)} ({MODE_NAMES.get(mode, mode)})"


def mode_name(system: str) -> str:
    """A system's mode as the tables say it ("process workers"), or "" for a peer with one."""
    mode = mode_of(system)
    return MODE_NAMES.get(mode, mode)


def backend_name(backend: str) -> str:
    return BACKEND_NAMES.get(backend, backend)


def ordered_backends(backends: Iterable[str]) -> list[str]:
    seen = list(dict.fromkeys(backends))
    rank = {name: i for i, name in enumerate(BACKEND_ORDER)}
    return sorted(seen, key=lambda b: (rank.get(b, len(rank)), b))


def stopped_peer(rows: Sequence[Row], backend: str) -> Row | None:
    """The peer stopped far behind (`workloads.FAR`) with the highest bound on `backend`."""
    peers = [
        r
        for r in rows
        if r["backend"] == backend and r["system"] != OURS and r.get("stopped_below_jobs_s")
    ]
    return max(peers, key=lambda r: r["stopped_below_jobs_s"], default=None)


def bound_ratio(ours: Row | None, stopped: Row) -> float | None:
    """The least ours ÷ a stopped peer can be: ours' rate over the peer's upper bound."""
    if ours is None or not ours["ok"] or not ours.get("e2e_jobs_s"):
        return None
    return float(ours["e2e_jobs_s"]) / float(stopped["stopped_below_jobs_s"])


def num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"
