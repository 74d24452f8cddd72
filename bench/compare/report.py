# SPDX-License-Identifier: MIT
"""What bench.compare prints and writes: tables, ratios, the machine, and the README block.

Kept apart from the runner and free of any queue library so that the
arithmetic that readers see (medians, ratios to the fastest peer, FAILED
instead of a number) can be tested quickly, without services or the peers'
venv. Every function here works on the plain dicts of `latest.json`:

- throughput rows: system, backend, ok, runs, runs_ok, enqueue_jobs_s,
  e2e_jobs_s (medians, None when failed), errors;
- latency rows: system, backend, ok, samples, expected, p50_ms, p99_ms, error;
- memory rows: system, backend, ok, jobs, e2e_jobs_s, rss_start_kib,
  rss_end_kib, rss_peak_kib, rss_growth_kib, error.
"""

from __future__ import annotations

import os
import shutil
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from .constants import (
    END,
    NO_PEER,
    OURS,
    README_CHART,
    ROOT,
    START,
    TIMES,
)
from .grid_report import markdown as grid_markdown
from .labels import (
    Row,
    backend_name,
    bound_ratio,
    mode_name,
    num,
    ordered_backends,
    stopped_peer,
    system_name,
)
from .modes import peer_of, slower_modes


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def fastest_peer(rows: Sequence[Row], backend: str) -> Row | None:
    """The peer with the highest median end-to-end rate on `backend`; failed ones never count."""
    peers = [
        r
        for r in rows
        if r["backend"] == backend and r["system"] != OURS and r["ok"] and r["e2e_jobs_s"]
    ]
    return max(peers, key=lambda r: r["e2e_jobs_s"], default=None)


def ours_row(rows: Sequence[Row], backend: str) -> Row | None:
    return next((r for r in rows if r["backend"] == backend and r["system"] == OURS), None)


def ratio(ours: Row | None, other: Row | None, key: str = "e2e_jobs_s") -> float | None:
    """ours[key] / other[key], or None if either failed or has no number."""
    if ours is None or other is None or not ours["ok"] or not other["ok"]:
        return None
    mine, theirs = ours.get(key), other.get(key)
    if not mine or not theirs:
        return None
    return float(mine) / float(theirs)


def summaries(rows: Sequence[Row]) -> list[Row]:
    """One line per backend: the fastest peer and ours over it (e2e and enqueue)."""
    out: list[Row] = []
    for backend in ordered_backends(r["backend"] for r in rows):
        best = fastest_peer(rows, backend)
        ours = ours_row(rows, backend)
        entry: Row = {"backend": backend, "fastest_peer": best["system"] if best else None}
        e2e = ratio(ours, best)
        enq = ratio(ours, best, "enqueue_jobs_s")
        entry["ours_over_fastest_e2e"] = round(e2e, 3) if e2e is not None else None
        entry["ours_over_fastest_enqueue"] = round(enq, 3) if enq is not None else None
        out.append(entry)
    return out


def mib(kib: int | None) -> str:
    return "-" if kib is None else f"{kib / 1024:,.1f}"


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def signed_mib(kib: int | None) -> str:
    return "-" if kib is None else f"{kib / 1024:+,.1f}"


def throughput_cells(rows: Sequence[Row], backend: str) -> list[list[str]]:
    """[system, enqueue, e2e, steady, runs ok, ours / this, first job, worker CPU, server CPU].

    A failed row says FAILED, not numbers. First job is seconds from starting
    the workers to the first job done; CPU is microseconds per job in the
    steady window (`proccpu`); "-" where it was not measured. The ratio to a
    peer's slower mode is in parentheses: it is not a margin, the ratio to
    the peer's faster mode is.
    """
    ours = ours_row(rows, backend)
    slower = slower_modes(rows, backend)
    cells: list[list[str]] = []
    for r in rows:
        if r["backend"] != backend:
            continue
        mine = ratio(ours, r) if r["system"] != OURS else None
        ratio_text = "-" if mine is None else f"{mine:.2f}x"
        if mine is not None and r["system"] in slower:
            ratio_text = f"({ratio_text})"
        runs = f"{r['runs_ok']}/{r['runs']}"
        if r["ok"]:
            enqueue, e2e = num(r.get("enqueue_jobs_s")), num(r.get("e2e_jobs_s"))
            steady = num(r.get("steady_jobs_s"))
            first = seconds(r.get("first_job_s"))
            worker_cpu, server_cpu = num(r.get("worker_cpu_us")), num(r.get("server_cpu_us"))
        elif r.get("stopped_below_jobs_s"):
            enqueue, steady, first, worker_cpu, server_cpu = "-", "-", "-", "-", "-"
            e2e, runs = f"< {num(r['stopped_below_jobs_s'])}", "stopped"
            least = bound_ratio(ours, r)
            ratio_text = "-" if least is None else f"> {least:.2f}x"
        else:
            enqueue, e2e, steady, first, worker_cpu, server_cpu = "-", "FAILED", "-", "-", "-", "-"
        cells.append(
            [
                r["system"],
                enqueue,
                e2e,
                steady,
                runs,
                ratio_text,
                first,
                worker_cpu,
                server_cpu,
            ]
        )
    return cells


def mode_notes(rows: Sequence[Row], backend: str) -> list[str]:
    """A note per peer's slower mode: "Huey: process workers 1.40x thread workers"."""
    by_system = {r["system"]: r for r in rows if r["backend"] == backend}
    notes: list[str] = []
    for slow, fast in slower_modes(rows, backend).items():
        gain = by_system[fast]["e2e_jobs_s"] / by_system[slow]["e2e_jobs_s"]
        peer = system_name(peer_of(fast))
        notes.append(f"{peer}: {mode_name(fast)} {gain:.2f}x {mode_name(slow)}")
    return notes


def caption(rows: Sequence[Row], backend: str) -> str:
    """The fastest peer (over every peer's every mode) and ours over it; then the modes' notes."""
    text = _fastest_caption(rows, backend)
    notes = mode_notes(rows, backend)
    return "; ".join([text, *notes])


def _fastest_caption(rows: Sequence[Row], backend: str) -> str:
    best = fastest_peer(rows, backend)
    if best is None:
        stopped = stopped_peer(rows, backend)
        least = None if stopped is None else bound_ratio(ours_row(rows, backend), stopped)
        if stopped is not None and least is not None:
            name = system_name(stopped["system"])
            return f"every peer was stopped far behind; rainier-queue / {name}: above {least:.2f}x"
        if any(r["backend"] == backend and r["system"] != OURS for r in rows):
            return "no peer finished every run"
        return NO_PEER.get(backend, "no peer run on this backend")
    ours = ours_row(rows, backend)
    e2e = ratio(ours, best)
    if e2e is None:
        return f"fastest peer: {system_name(best['system'])}; rainier-queue FAILED"
    name = system_name(best["system"])
    if mode_name(best["system"]):  # "Huey, thread workers": no brackets within the brackets
        name = f"{system_name(peer_of(best['system']))}, {mode_name(best['system'])}"
    text = f"rainier-queue / fastest peer ({name}): end-to-end {e2e:.2f}x"
    enq = ratio(ours, best, "enqueue_jobs_s")
    if enq is not None:
        text += f", enqueue {enq:.2f}x"
    return text


def throughput_table(rows: Sequence[Row], backend: str, title: str) -> Table:
    table = Table(title=f"{backend_name(backend)} throughput: {title}", caption=None)
    for name, justify in (
        ("system", "left"),
        ("enqueue jobs/s", "right"),
        ("end-to-end jobs/s", "right"),
        ("steady jobs/s", "right"),
        ("runs ok", "right"),
        ("ours / this (e2e)", "right"),
        ("first job s", "right"),
        ("worker CPU µs/job", "right"),
        ("server CPU µs/job", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for cells in throughput_cells(rows, backend):
        if cells[2] == "FAILED":
            cells[2] = "[red]FAILED[/red]"
        table.add_row(*cells)
    table.caption = caption(rows, backend)
    return table


def latency_table(rows: Sequence[Row], title: str) -> Table:
    table = Table(title=f"push-to-start latency: {title}")
    for name in ("system", "backend", "samples", "p50 ms", "p99 ms", "max ms"):
        table.add_column(name, justify="left" if name in ("system", "backend") else "right")
    for r in rows:
        if not r["ok"]:
            table.add_row(r["system"], backend_name(r["backend"]), "[red]FAILED[/red]", "", "", "")
            continue
        table.add_row(
            r["system"],
            backend_name(r["backend"]),
            f"{r['samples']}/{r['expected']}",
            num(r["p50_ms"], 2),
            num(r["p99_ms"], 2),
            num(r.get("max_ms"), 2),
        )
    return table


def memory_table(rows: Sequence[Row], title: str) -> Table:
    table = Table(title=f"worker memory: {title}")
    for name in ("system", "backend", "jobs", "jobs/s", "RSS start MiB", "RSS end MiB"):
        table.add_column(name, justify="left" if name in ("system", "backend") else "right")
    table.add_column("peak MiB", justify="right")
    table.add_column("end - start MiB", justify="right")
    for r in rows:
        if not r["ok"]:
            table.add_row(
                r["system"], backend_name(r["backend"]), f"{r['jobs']:,}", "[red]FAILED[/red]"
            )
            continue
        table.add_row(
            r["system"],
            backend_name(r["backend"]),
            f"{r['jobs']:,}",
            num(r["e2e_jobs_s"]),
            mib(r["rss_start_kib"]),
            mib(r["rss_end_kib"]),
            mib(r["rss_peak_kib"]),
            signed_mib(r["rss_growth_kib"]),
        )
    return table


# -- the machine ---------------------------------------------------------------------------


def machine(proc: Path = Path("/proc")) -> Row:
    """Cores, memory and CPU model, from /proc (None where it cannot be read)."""
    info: Row = {"cores": os.cpu_count(), "memory_gib": None, "cpu": None}
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["memory_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        pass
    try:
        for line in (proc / "cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return info


# -- the README block -------------------------------------------------------------------------


def markdown_block(result: Row, chart: str | None) -> str:
    """The markdown that goes between the bench markers in README.md."""
    box = result["machine"]
    memory = f"{box['memory_gib']:g} GiB" if box.get("memory_gib") else "unknown memory"
    cpu = f" ({box['cpu']})" if box.get("cpu") else ""
    p = result["params"]
    lines = [
        f"Measured on {result['date']} on a {box['cores']}-core, {memory} machine{cpu}, "
        "with every service on the same machine, by",
        "",
        "```sh",
        result["command"],
        "```",
        "",
        f"which took {result['total_s'] / 60:.1f} minutes{_spent(result)}. "
        f"Throughput: {p['jobs']:,} jobs, "
        f"{p['processes']} worker processes at concurrency {p['concurrency']}, medians of "
        f"{p['rounds']} interleaved rounds. End to end counts from starting the workers to the "
        "last job, start-up included, and first job is how long the first one took to finish; "
        "steady is the rate between 10% and 90% of the jobs, and the CPU columns are the "
        "CPU time the worker processes and the server processes spent per job in that window "
        "(on Redis the server's figure includes the counter's INCR, the same for every "
        "system). "
        "Every run checks that a Redis counter reached exactly N; a run that did not is "
        "FAILED, not a number. Absolute numbers drift on a shared machine; the ratios are "
        "the point.",
        "",
    ]
    rows = result.get("throughput", [])
    if rows:
        lines += [
            "| backend | system | enqueue jobs/s | end-to-end jobs/s | steady jobs/s "
            "| rainier-queue ÷ it, end to end | first job, s | CPU µs/job: workers | server |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for backend in ordered_backends(r["backend"] for r in rows):
            for cells in throughput_cells(rows, backend):
                system, enqueue, e2e, steady, _runs, mine, first, worker_cpu, server_cpu = cells
                name = f"**{system}**" if system == OURS else system_name(system)
                if system == OURS and e2e != "FAILED":
                    e2e = f"**{e2e}**"
                cell = "" if system == OURS else ("—" if mine == "-" else mine.replace("x", TIMES))
                lines.append(
                    f"| {backend_name(backend)} | {name} | {enqueue} | {e2e} | {steady} | {cell} "
                    f"| {first} | {worker_cpu} | {server_cpu} |"
                )
        lines.append("")
        notes = [
            f"{backend_name(b)}: {caption(rows, b)}."
            for b in ordered_backends(r["backend"] for r in rows)
        ]
        lines += [f"- {note}" for note in notes] + [""]
    latency = result.get("latency", [])
    if latency:
        lp = result["params"]
        lines += [
            f"Push-to-start latency of an idle worker ({lp['latency_samples']} jobs pushed one "
            f"at a time at {lp['latency_rate']:g}/s):",
            "",
            "| system | backend | p50 ms | p99 ms |",
            "|---|---|---|---|",
        ]
        for r in latency:
            p50 = num(r["p50_ms"], 1) if r["ok"] else "FAILED"
            p99 = num(r["p99_ms"], 1) if r["ok"] else "FAILED"
            name = system_name(r["system"])
            lines.append(f"| {name} | {backend_name(r['backend'])} | {p50} | {p99} |")
        lines.append("")
    memory_rows = result.get("memory", [])
    if memory_rows:
        lines += [
            "Resident memory of one worker process over a long run:",
            "",
            "| system | backend | jobs | RSS at start MiB | RSS at end MiB | end - start MiB |",
            "|---|---|---|---|---|---|",
        ]
        for r in memory_rows:
            if r["ok"]:
                start, end = mib(r["rss_start_kib"]), mib(r["rss_end_kib"])
                growth = signed_mib(r["rss_growth_kib"])
            else:
                start = end = growth = "FAILED"
            lines.append(
                f"| {system_name(r['system'])} | {backend_name(r['backend'])} | {r['jobs']:,} | "
                f"{start} | {end} | {growth} |"
            )
        lines.append("")
    lines += grid_markdown(result)
    if chart:
        lines += [f"![End-to-end jobs/s per system, per backend]({chart})", ""]
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    """`text` with everything between the bench markers replaced by `block`.

    The markers stay. Raises ValueError unless each marker occurs exactly once,
    start before end, so that a README without them is never rewritten by guess.
    """
    starts, ends = text.count(START), text.count(END)
    if starts != 1 or ends != 1:
        raise ValueError(f"expected one {START} and one {END} marker, found {starts} and {ends}")
    head, rest = text.split(START, 1)
    if END not in rest:
        raise ValueError(f"{END} comes before {START}")
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{block.strip()}\n{END}{tail}"


def _spent(result: dict[str, Any]) -> str:
    """Where the run's minutes went, by workload: " (throughput 9.1, ...)", or nothing."""
    spent = result.get("workload_s") or {}
    if not spent:
        return ""
    return " (" + ", ".join(f"{name} {s / 60:.1f}" for name, s in spent.items()) + ")"


def write_readme(path: Path, result: Row, chart: str | None) -> None:
    """Rewrite the marked block of the README at `path` from one run's result.

    `chart` is the run's own chart, relative to the repository. Every run
    draws one, quick runs included, so the README's tracked copy
    (`README_CHART`) is replaced only here, together with the numbers it
    shows; a run that does not write the README leaves it alone.
    """
    shown = None
    if chart is not None:
        drawn = ROOT / chart
        if not drawn.is_file():
            raise ValueError(f"the run's chart {chart} is gone; run the benchmark again")
        if drawn != README_CHART:
            shutil.copyfile(drawn, README_CHART)
        shown = os.path.relpath(README_CHART, ROOT)
    text = path.read_text()
    path.write_text(replace_block(text, markdown_block(result, shown)))
