# SPDX-License-Identifier: MIT
"""Peers run in each of their serious modes, and ours compared with the faster one.

A ratio against a peer's slow mode is not a margin: Huey's thread workers
and Celery's thread pool run beside Huey's process workers and Celery's
prefork pool, and these tests pin how the comparison picks among them:
the fastest peer is the fastest row over every peer's every mode, a FAILED
mode never counts, the slower mode's ratio is marked, the tables say which
mode won, and the grid and the I/O-bound workload run every mode.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import pytest
from bench.compare import grid, grid_report, labels, modes, report, workloads
from bench.compare.adapters import adapter_env
from bench.compare.constants import END, OURS, START
from bench.compare.peers import _common


def row(system: str, backend: str, e2e: float | None, **more: Any) -> dict[str, Any]:
    ok = e2e is not None
    return {
        "system": system,
        "backend": backend,
        "ok": ok,
        "runs": 1,
        "runs_ok": 1 if ok else 0,
        "enqueue_jobs_s": 10_000.0 if ok else None,
        "e2e_jobs_s": e2e,
        "steady_jobs_s": e2e,
        "errors": [] if ok else ["counter is 1999, expected 2000"],
        **more,
    }


REDIS = [
    row(OURS, "redis", 9000.0),
    row("huey/process", "redis", 6000.0),
    row("huey/thread", "redis", 3000.0),
    row("taskiq", "redis", 4000.0),
    row("celery/prefork", "redis", None),
    row("celery/threads", "redis", 2000.0),
]


def test_every_moded_peer_runs_once_per_mode_and_never_bare() -> None:
    systems = {(s, b) for s, b, _ in workloads.SYSTEMS}

    for backend in ("sqlite", "mysql", "redis"):
        assert {("huey/process", backend), ("huey/thread", backend)} <= systems
    for backend in ("redis", "rabbitmq", "sqs"):
        assert {("celery/prefork", backend), ("celery/threads", backend)} <= systems
    assert not {s for s, _ in systems} & {"huey", "celery"}
    assert ("dramatiq", "redis") in systems, "a peer with one mode keeps its name"


def test_only_picks_a_peer_by_its_name_or_one_mode_by_peer_and_mode() -> None:
    assert modes.selected("huey/thread", ["huey"])
    assert modes.selected("huey/thread", ["huey/thread"])
    assert not modes.selected("huey/process", ["huey/thread"])
    assert not modes.selected("huey/process", ["hue"])
    assert modes.selected("taskiq", ["taskiq"])


def test_the_fastest_peer_is_the_fastest_mode_of_any_peer() -> None:
    best = report.fastest_peer(REDIS, "redis")

    assert best is not None
    assert best["system"] == "huey/process"
    [summary] = report.summaries(REDIS)
    assert summary["fastest_peer"] == "huey/process"
    assert summary["ours_over_fastest_e2e"] == 1.5


def test_a_failed_mode_is_never_the_faster_one() -> None:
    rows = [
        row(OURS, "redis", 9000.0),
        row("huey/process", "redis", None),
        row("huey/thread", "redis", 3000.0),
        row("taskiq", "redis", 4000.0),
    ]

    best = report.fastest_peer(rows, "redis")
    assert best is not None
    assert best["system"] == "taskiq"
    assert modes.slower_modes(rows, "redis") == {}, "one mode with a number: none is slower"
    cells = {c[0]: c for c in report.throughput_cells(rows, "redis")}
    assert cells["huey/process"][2] == "FAILED"
    assert cells["huey/thread"][5] == "3.00x", "the only mode with a number is the peer's best"


def test_the_slower_modes_ratio_is_marked_and_the_caption_says_which_mode_won() -> None:
    rows = [
        row(OURS, "redis", 9000.0),
        row("huey/process", "redis", 4500.0),
        row("huey/thread", "redis", 6000.0),
        row("celery/prefork", "redis", 3000.0),
        row("celery/threads", "redis", 1500.0),
    ]

    assert modes.slower_modes(rows, "redis") == {
        "huey/process": "huey/thread",
        "celery/threads": "celery/prefork",
    }
    cells = {c[0]: c for c in report.throughput_cells(rows, "redis")}
    assert cells["huey/thread"][5] == "1.50x"
    assert cells["huey/process"][5] == "(2.00x)"
    assert cells["celery/prefork"][5] == "3.00x"
    assert cells["celery/threads"][5] == "(6.00x)"
    caption = report.caption(rows, "redis")
    assert caption.startswith("rainier-queue / fastest peer (Huey, thread workers): ")
    assert "Huey: thread workers 1.33x process workers" in caption
    assert "Celery: prefork pool 2.00x thread pool" in caption


def test_modes_are_named_after_the_peer() -> None:
    assert labels.system_name("huey/process") == "Huey (process workers)"
    assert labels.system_name("celery/threads") == "Celery (thread pool)"
    assert labels.system_name("taskiq") == "taskiq"
    assert labels.mode_name("taskiq") == ""


def test_the_adapter_is_told_its_mode_and_refuses_one_it_lacks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert adapter_env("t", "redis", "huey/thread")[_common.MODE_ENV] == "thread"
    assert adapter_env("t", "redis", OURS)[_common.MODE_ENV] == ""

    monkeypatch.delenv(_common.MODE_ENV, raising=False)
    assert _common.mode(("process", "thread")) == "process", "unset: the documented default"
    monkeypatch.setenv(_common.MODE_ENV, "greenlet")
    with pytest.raises(SystemExit, match="choose one of process, thread"):
        _common.mode(("process", "thread"))


def test_grid_contenders_count_peers_and_bring_every_mode_that_finished() -> None:
    base = [
        row(OURS, "redis", 9000.0),
        row("huey/process", "redis", 6000.0),
        row("huey/thread", "redis", 2000.0),  # far below, but Huey is chosen: it runs too
        row("taskiq", "redis", 4000.0),
        row("dramatiq", "redis", 3900.0),
        row("celery/prefork", "redis", None),
        row("celery/threads", "redis", 5000.0),
    ]

    assert grid.contenders(base, limit=2) == {
        ("huey/process", "redis"),
        ("huey/thread", "redis"),
        ("celery/threads", "redis"),
    }
    assert grid.contenders(base, limit=1) == {("huey/process", "redis"), ("huey/thread", "redis")}


def test_the_io_bound_workload_runs_the_thread_capable_peers_in_every_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[workloads.Setting] = []

    def throughput(_args: object, _sink: object, setting: workloads.Setting) -> list[Any]:
        seen.append(setting)
        return []

    monkeypatch.setattr(workloads, "available", lambda *_: None)
    monkeypatch.setattr(grid, "throughput", throughput)
    args = argparse.Namespace(
        backend=None,
        only=None,
        no_peers=False,
        io_jobs=2000,
        io_concurrency=64,
        io_sleep_ms=20.0,
        grid_rounds=1,
    )

    grid.io_bound(args, io.StringIO())

    [setting] = seen
    assert setting.pairs is not None
    redis = {s for s, b in setting.pairs if b == "redis"}
    assert {"huey/process", "huey/thread", "celery/prefork", "celery/threads"} <= redis
    assert {OURS, "dramatiq", "taskiq", "saq"} <= redis
    assert "rq" not in redis, "one job at a time per worker: nothing to overlap the waits"
    assert not {b for _, b in setting.pairs} - set(grid.IO_BACKENDS)


def test_the_mode_table_says_which_mode_won_at_each_setting(tmp_path: Path) -> None:
    def at(setting: str, r: dict[str, Any]) -> dict[str, Any]:
        return {**r, "setting": setting, "jobs": 20_000, "concurrency": 64}

    result: dict[str, Any] = {
        "date": "2026-12-06",
        "machine": {"cores": 2, "memory_gib": 23.5, "cpu": "Test CPU"},
        "command": "make bench",
        "total_s": 60.0,
        "params": {"jobs": 5000, "processes": 2, "concurrency": 8, "rounds": 1},
        "throughput": REDIS,
        "grid": [],
        "io": [
            at("I/O-bound", row(OURS, "redis", 5000.0)),
            at("I/O-bound", row("huey/process", "redis", 1000.0)),
            at("I/O-bound", row("huey/thread", "redis", 4000.0)),
        ],
    }

    lines = grid_report.mode_lines(result)

    today, io_bound = "5,000 jobs, c8 (today's)", "20,000 jobs, I/O-bound (20 ms), c64"
    assert lines == [
        [
            "Redis",
            today,
            "Huey",
            "process workers",
            "6,000",
            "thread workers",
            "3,000",
            "2.00\u00d7",
        ],
        [
            "Redis",
            io_bound,
            "Huey",
            "thread workers",
            "4,000",
            "process workers",
            "1,000",
            "4.00\u00d7",
        ],
    ]
    grid_rows = grid_report.grid_lines(result)
    io_line = next(line for line in grid_rows if "I/O-bound" in line[1])
    assert io_line[3:] == ("Huey (thread workers)", "4,000", "1.25\u00d7")
    readme = tmp_path / "README.md"
    readme.write_text(f"{START}\n{END}\n")
    report.write_readme(readme, result, None)
    text = readme.read_text()
    assert "| Redis | Huey (thread workers) | 10,000 | 3,000 | 3,000 | (3.00\u00d7) |" in text
    assert "| Redis | 5,000 jobs, c8 (today's) | Huey | process workers | 6,000 |" in text
