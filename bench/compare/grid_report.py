# SPDX-License-Identifier: MIT
"""The grid's tables: ours over the fastest peer at every setting, the backlog, the enqueue path.

One table answers "is the margin real": a row per backend and setting, with
ours, the fastest peer there and the ratio, pickup latency included (as the
peer's milliseconds over ours, so above 1 is better for ours everywhere).
The backlog and enqueue tables are ours alone, against ourselves: the drain
rate at the end of a million-job drain against its start and against the
20,000-job cell, and `dispatch_many` against `push_many`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from .constants import FAR, OURS, PEER_RUN_FLOOR_S, TIMES
from .labels import (
    backend_name,
    bound_ratio,
    mode_name,
    num,
    ordered_backends,
    stopped_peer,
    system_name,
)
from .modes import peer_of, slower_modes

Row = dict[str, Any]
GridLine = tuple[str, str, str, str, str, str]
"""backend, setting, ours, fastest peer, its number, ratio (as text)."""


def _by_setting(rows: Sequence[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for r in rows:
        out.setdefault(r.get("setting") or "", []).append(r)
    return out


def _best_peer(rows: Sequence[Row], backend: str, key: str) -> Row | None:
    peers = [
        r
        for r in rows
        if r["backend"] == backend and r["system"] != OURS and r["ok"] and r.get(key)
    ]
    return max(peers, key=lambda r: r[key], default=None)


def _ours(rows: Sequence[Row], backend: str) -> Row | None:
    return next((r for r in rows if r["backend"] == backend and r["system"] == OURS), None)


def _ratio_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}{TIMES}"


def _settings(result: Row) -> list[tuple[str, list[Row]]]:
    """(name, rows) of every throughput setting run: today's, the grid's cells, the I/O-bound."""
    p = result["params"]
    today = f"{p['jobs']:,} jobs, c{p['concurrency']} (today's)"
    settings: list[tuple[str, list[Row]]] = [(today, result.get("throughput", []))]
    for name, rows in _by_setting(result.get("grid", [])).items():
        jobs = rows[0].get("jobs") if rows else None
        short = name.replace("concurrency ", "c")
        settings.append((f"{jobs:,} jobs, {short}" if jobs else short, rows))
    io = result.get("io", [])
    if io:
        sleep = p.get("io_sleep_ms", 20)
        settings.append(
            (f"{io[0]['jobs']:,} jobs, I/O-bound ({sleep:g} ms), c{io[0]['concurrency']}", io)
        )
    return settings


def mode_lines(result: Row) -> list[list[str]]:
    """[backend, setting, peer, faster mode, its jobs/s, slower mode, its jobs/s, faster ÷ slower].

    One line per peer run in several modes, per backend and setting: which
    mode won there. Only the faster one's number stands against ours.
    """
    out: list[list[str]] = []
    for name, rows in _settings(result):
        for backend in ordered_backends(r["backend"] for r in rows):
            by_system = {r["system"]: r for r in rows if r["backend"] == backend}
            for slow, fast in slower_modes(rows, backend).items():
                a, b = by_system[fast]["e2e_jobs_s"], by_system[slow]["e2e_jobs_s"]
                out.append(
                    [
                        backend_name(backend),
                        name,
                        system_name(peer_of(fast)),
                        mode_name(fast),
                        num(a),
                        mode_name(slow),
                        num(b),
                        _ratio_text(a / b),
                    ]
                )
    return out


def grid_lines(result: Row) -> list[GridLine]:
    """Every setting's line per backend: throughput cells, enqueue, I/O, pickup latency."""
    lines: list[GridLine] = []
    settings = _settings(result)
    grid = _by_setting(result.get("grid", []))
    backends = ordered_backends(
        r["backend"] for _, rows in settings for r in rows if r["backend"] not in ("memory",)
    )
    enqueue = {r["backend"]: r for r in result.get("enqueue", [])}
    latency = result.get("latency", [])
    for backend in backends:
        for name, rows in settings:
            ours = _ours(rows, backend)
            if ours is None:
                continue
            best = _best_peer(rows, backend, "e2e_jobs_s")
            mine = ours.get("e2e_jobs_s") if ours["ok"] else None
            theirs = best["e2e_jobs_s"] if best else None
            peer_name, peer_number = (
                system_name(best["system"]) if best else "none ran",
                num(theirs),
            )
            ratio_text = _ratio_text(mine / theirs if mine and theirs else None)
            if best is None and (stopped := stopped_peer(rows, backend)) is not None:
                least = bound_ratio(ours, stopped)
                peer_name = system_name(stopped["system"])
                peer_number = f"< {num(stopped['stopped_below_jobs_s'])} (stopped)"
                ratio_text = "-" if least is None else f"> {least:.2f}{TIMES}"
            lines.append(
                (
                    backend,
                    f"end to end, {name}",
                    num(mine) if ours["ok"] else "FAILED",
                    peer_name,
                    peer_number,
                    ratio_text,
                )
            )
        ways = enqueue.get(backend)
        base_rows = grid.get("concurrency 8") or result.get("throughput", [])
        peer = _best_peer(base_rows, backend, "enqueue_jobs_s")
        if ways and ways.get("dispatch_many_jobs_s"):
            mine = ways["dispatch_many_jobs_s"]
            theirs = peer["enqueue_jobs_s"] if peer else None
            lines.append(
                (
                    backend,
                    "enqueue through dispatch_many",
                    num(mine),
                    system_name(peer["system"]) if peer else "none ran",
                    num(theirs),
                    _ratio_text(mine / theirs if theirs else None),
                )
            )
        mine_lat = next(
            (r for r in latency if r["backend"] == backend and r["system"] == OURS and r["ok"]),
            None,
        )
        for pct in ("p50_ms", "p99_ms"):
            peers = [
                r
                for r in latency
                if r["backend"] == backend and r["system"] != OURS and r["ok"] and r.get(pct)
            ]
            best_lat = min(peers, key=lambda r: r[pct], default=None)
            if mine_lat is None:
                continue
            ours_ms, theirs_ms = mine_lat.get(pct), best_lat[pct] if best_lat else None
            lines.append(
                (
                    backend,
                    f"pickup latency {pct[:3]}, ms (peer ÷ ours)",
                    num(ours_ms, 1),
                    system_name(best_lat["system"]) if best_lat else "none ran",
                    num(theirs_ms, 1),
                    _ratio_text(theirs_ms / ours_ms if ours_ms and theirs_ms else None),
                )
            )
    return lines


def backlog_lines(result: Row) -> list[list[str]]:
    """[backend, jobs, first tenth, last tenth, last ÷ first, small steady, first ÷ small, left].

    "small" is the grid's cell (`--grid-jobs` queued) at the backlog drain's
    concurrency, with the same processes.
    """
    cells = _by_setting(result.get("grid", []))
    out: list[list[str]] = []
    for r in result.get("backlog", []):
        if r["system"] != OURS:
            continue
        small = _ours(cells.get(f"concurrency {r.get('concurrency')}", []), r["backend"])
        small_rate = small.get("steady_jobs_s") if small and small["ok"] else None
        start, end = r.get("start_jobs_s"), r.get("end_jobs_s")
        left = _left_behind(r)
        out.append(
            [
                backend_name(r["backend"]),
                f"{r['jobs']:,}",
                num(start) if r["ok"] else "FAILED",
                num(end) if r["ok"] else "FAILED",
                _ratio_text(end / start if start and end else None),
                num(small_rate),
                _ratio_text(start / small_rate if start and small_rate else None),
                left,
            ]
        )
    return out


def _left_behind(r: Row) -> str:
    if r.get("table_bytes") is not None:
        table, indexes = r["table_bytes"] / 2**20, r["index_bytes"] / 2**20
        text = f"table {table:,.1f} MiB, indexes {indexes:,.1f} MiB"
        if r.get("hot_update_share") is not None:
            text += f", HOT updates {r['hot_update_share']:.0%}"
        return text
    if r.get("file_bytes") is not None:
        return f"file and WAL {r['file_bytes'] / 2**20:,.1f} MiB"
    return "-"


def enqueue_lines(result: Row) -> list[list[str]]:
    """[backend, push_many, push_many built, dispatch_many, each push ÷ dispatch]."""
    return [
        [
            backend_name(r["backend"]),
            num(r.get("push_many_jobs_s")),
            num(r.get("push_many_built_jobs_s")),
            num(r.get("dispatch_many_jobs_s")),
            _ratio_text(r.get("push_over_dispatch")),
            _ratio_text(r.get("built_over_dispatch")),
        ]
        for r in result.get("enqueue", [])
    ]


MODE_HEAD = (
    "backend",
    "setting",
    "peer",
    "faster mode",
    "faster mode jobs/s",
    "slower mode",
    "slower mode jobs/s",
    "faster ÷ slower",
)
GRID_HEAD = ("backend", "setting", "rainier-queue", "fastest peer", "its number", "ours ÷ it")
BACKLOG_HEAD = (
    "backend",
    "backlog",
    "jobs/s, first tenth",
    "jobs/s, last tenth",
    "last ÷ first",
    "steady jobs/s, the grid's cell at that concurrency",
    "first tenth ÷ that",
    "left after the drain",
)
ENQUEUE_HEAD = (
    "backend",
    "push_many jobs/s (ready envelopes)",
    "push_many jobs/s (envelopes built in the clock)",
    "dispatch_many jobs/s (Jobs built in the clock)",
    "ready push ÷ dispatch",
    "built push ÷ dispatch",
)


def tables(result: Row) -> list[Table]:
    """The grid's tables for the terminal (none for a part that did not run)."""
    out: list[Table] = []
    specs: list[tuple[str, Sequence[str], list[Sequence[str]]]] = [
        (
            "ours ÷ the fastest peer, at every setting",
            GRID_HEAD,
            [[backend_name(line[0]), *line[1:]] for line in grid_lines(result)],
        ),
        (
            "the peers run in two modes: which won (ours is compared with the faster)",
            MODE_HEAD,
            list(mode_lines(result)),
        ),
        ("the drain of a large backlog (ours)", BACKLOG_HEAD, list(backlog_lines(result))),
        (
            "bulk enqueue: the driver's push_many and the manager's dispatch_many (ours)",
            ENQUEUE_HEAD,
            list(enqueue_lines(result)),
        ),
    ]
    for title, head, rows in specs:
        if not rows:
            continue
        table = Table(title=title)
        for i, name in enumerate(head):
            table.add_column(name, justify="left" if i < 2 else "right")
        for row in rows:
            table.add_row(*row)
        out.append(table)
    return out


def markdown(result: Row) -> list[str]:
    """The grid's part of the README block."""
    p = result["params"]
    grid = [[backend_name(line[0]), *line[1:]] for line in grid_lines(result)]
    return [
        *_md_table(
            "The grid: ours over the fastest peer at each setting (2 worker processes, medians "
            f"of {p.get('grid_rounds', p['rounds'])} interleaved rounds; "
            "`cN` is the concurrency per process; pickup latency is the peer's milliseconds "
            f"over ours, so above 1{TIMES} is ours ahead there too; a peer ran in a grid cell "
            "if it came within half of the fastest peer in the run above; a peer more than "
            f"{FAR:g}{TIMES} behind ours after the first round ran that round only, and a peer "
            f"run still going after {FAR:g} times ours' drain of the same jobs (and at least "
            f"{PEER_RUN_FLOOR_S:g} s) was stopped there, its number then a bound):",
            GRID_HEAD,
            grid,
        ),
        *_md_table(
            "The peers run in two modes (Huey's process and thread workers, Celery's prefork "
            "and thread pools), at each setting: which mode was faster; ours is compared with "
            "the faster one only, and a ratio to the slower one is no margin:",
            MODE_HEAD,
            mode_lines(result),
        ),
        *_md_table(
            "A large backlog, ours alone (no peer: enqueueing a million jobs through the slower "
            "peers would take longer than the whole benchmark), drained to the end by "
            f"{p['processes']} processes at concurrency {_backlog_concurrency(result)}; the "
            "first and last tenths are the rates between 1% and 10% and between 90% and 100% "
            "of the jobs:",
            BACKLOG_HEAD,
            backlog_lines(result),
        ),
        *_md_table(
            "Bulk enqueue, ours: the driver's `push_many` of envelopes made before the clock "
            "and of envelopes made inside it (`QueuedJob.create`, as a caller of `push_many` "
            "pays), against `QueueManager.dispatch_many` of `Job` objects built inside the "
            "clock:",
            ENQUEUE_HEAD,
            enqueue_lines(result),
        ),
    ]


def _backlog_concurrency(result: Row) -> str:
    seen = {r.get("concurrency") for r in result.get("backlog", [])}
    return ", ".join(str(c) for c in sorted(c for c in seen if c is not None)) or "-"


def _md_table(intro: str, head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """`intro`, then a markdown table of `rows` under `head`; nothing when there are no rows."""
    if not rows:
        return []
    return [intro, "", _md_row(head), _md_row(["---"] * len(head)), *map(_md_row, rows), ""]


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


__all__ = ["backlog_lines", "enqueue_lines", "grid_lines", "markdown", "mode_lines", "tables"]
