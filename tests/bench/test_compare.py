# SPDX-License-Identifier: MIT
"""bench.compare's arithmetic and bookkeeping, without services or the peers' venv.

What a reader takes from the benchmark is a handful of ratios and the word
FAILED where a count did not land; these tests pin exactly that: medians,
the fastest peer (never a failed one), the README block rewrite (only
between the markers, never by guess), the exact-count check of the latency
workload, and the memory sampler's reading of /proc.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from bench.compare import constants, labels, report
from bench.compare.constants import END, OURS, START
from bench.compare.latency_check import check_counts, count_lines, summary
from bench.compare.proccpu import TICK, CpuWindow, cpu_seconds, server_pids
from bench.compare.procmem import RssSampler, descendants, rss_kib, tree_rss_kib


def row(system: str, backend: str, e2e: float | None, enqueue: float | None = 1000.0) -> Any:
    ok = e2e is not None
    return {
        "system": system,
        "backend": backend,
        "ok": ok,
        "runs": 3,
        "runs_ok": 3 if ok else 2,
        "enqueue_jobs_s": enqueue if ok else None,
        "e2e_jobs_s": e2e,
        "steady_jobs_s": e2e * 1.2 if e2e is not None else None,
        "first_job_s": 0.25 if ok else None,
        "worker_cpu_us": 80.0 if ok else None,
        "server_cpu_us": None,
        "errors": [] if ok else ["counter is 4999, expected 5000"],
    }


ROWS = [
    row(OURS, "postgres", 3000.0, 40000.0),
    row("pgqueuer", "postgres", 1000.0, 80000.0),
    row("procrastinate", "postgres", None),
    row(OURS, "mysql", 2000.0),
    row(OURS, "redis", None),
    row("huey", "redis", 500.0),
]


def result(**extra: Any) -> dict[str, Any]:
    return {
        "date": "2026-12-02",
        "machine": {"cores": 2, "memory_gib": 23.5, "cpu": "Test CPU"},
        "command": "make bench",
        "total_s": 600.0,
        "params": {
            "jobs": 5000,
            "processes": 2,
            "concurrency": 8,
            "rounds": 3,
            "latency_rate": 50.0,
            "latency_samples": 300,
            "memory_jobs": 200000,
        },
        "throughput": ROWS,
        "latency": [
            {
                "system": OURS,
                "backend": "redis",
                "ok": True,
                "samples": 300,
                "expected": 300,
                "p50_ms": 1.7,
                "p99_ms": 2.6,
            },
            {
                "system": OURS,
                "backend": "mysql",
                "ok": False,
                "samples": 299,
                "expected": 300,
                "p50_ms": 500.0,
                "p99_ms": 990.0,
            },
        ],
        "memory": [
            {
                "system": OURS,
                "backend": "redis",
                "ok": True,
                "jobs": 200000,
                "e2e_jobs_s": 4000.0,
                "rss_start_kib": 40960,
                "rss_end_kib": 41984,
                "rss_peak_kib": 42000,
                "rss_growth_kib": 1024,
            },
        ],
        **extra,
    }


def test_a_failed_peer_is_never_the_fastest() -> None:
    best = report.fastest_peer(ROWS, "postgres")
    assert best is not None
    assert best["system"] == "pgqueuer"


def test_ratios_to_the_fastest_peer_and_none_when_ours_failed() -> None:
    by_backend = {s["backend"]: s for s in report.summaries(ROWS)}
    assert by_backend["postgres"]["ours_over_fastest_e2e"] == 3.0
    assert by_backend["postgres"]["ours_over_fastest_enqueue"] == 0.5
    assert by_backend["redis"]["fastest_peer"] == "huey"
    assert by_backend["redis"]["ours_over_fastest_e2e"] is None
    assert by_backend["mysql"]["fastest_peer"] is None


def test_failed_rows_show_failed_not_a_number() -> None:
    cells = {c[0]: c for c in report.throughput_cells(ROWS, "postgres")}
    assert cells["procrastinate"][2] == "FAILED"
    assert cells["procrastinate"][4] == "2/3"
    assert cells["pgqueuer"][5] == "3.00x"
    assert cells["pgqueuer"][3] == "1,200"
    redis = {c[0]: c for c in report.throughput_cells(ROWS, "redis")}
    assert redis[OURS][2] == "FAILED"
    assert redis["huey"][5] == "-"  # no ratio against a failed ours
    # First job in seconds, then CPU per job: workers, server ("-" where not measured).
    assert cells["pgqueuer"][6:] == ["0.25", "80", "-"]
    assert cells["procrastinate"][6:] == ["-", "-", "-"]


def test_captions_name_the_fastest_peer_or_say_there_is_none() -> None:
    assert "(PgQueuer)" in report.caption(ROWS, "postgres")
    assert "3.00x" in report.caption(ROWS, "postgres")
    assert "no peer ran on MySQL" in report.caption(ROWS, "mysql")
    assert "FAILED" in report.caption(ROWS, "redis")


def test_the_kafka_row_stands_alone_and_says_how_many_partitions_it_ran_on(
    tmp_path: Path,
) -> None:
    rows = [*ROWS, row(OURS, "kafka", 1100.0, 15000.0)]
    text = report.caption(rows, "kafka")

    assert f"{constants.KAFKA_PARTITIONS} partitions" in text
    assert "no peer ran on Kafka" in text
    readme = tmp_path / "README.md"
    readme.write_text(f"{START}\n{END}\n")
    report.write_readme(readme, result(throughput=rows), None)
    written = readme.read_text()
    assert "| Kafka | **rainier-queue** | 15,000 | **1,100** |" in written
    assert f"Kafka: one topic of {constants.KAFKA_PARTITIONS} partitions" in written


def test_backends_are_ordered_embedded_first() -> None:
    assert labels.ordered_backends(["redis", "zz", "memory", "postgres"]) == [
        "memory",
        "postgres",
        "redis",
        "zz",
    ]


def test_replace_block_keeps_everything_outside_the_markers() -> None:
    text = f"# Title\n\nbefore\n{START}\nold table\n{END}\nafter\n"
    out = report.replace_block(text, "new table\n")
    assert out == f"# Title\n\nbefore\n{START}\nnew table\n{END}\nafter\n"


@pytest.mark.parametrize(
    "text",
    ["no markers at all\n", f"{START}\n{START}\n{END}\n", f"{END}\nx\n{START}\n", f"{START}\n"],
)
def test_replace_block_refuses_to_guess(text: str) -> None:
    with pytest.raises(ValueError, match="marker|before"):
        report.replace_block(text, "new")


def test_write_readme_on_a_temp_file(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n\n{START}\nstale\n{END}\n\n## Developing\n")
    report.write_readme(readme, result(), "bench/results/compare.png")
    text = readme.read_text()
    assert text.startswith("intro\n\n")
    assert text.endswith(f"{END}\n\n## Developing\n")
    assert "stale" not in text
    block = text.split(START)[1].split(END)[0]
    assert "2026-12-02" in block
    assert "2-core, 23.5 GiB machine (Test CPU)" in block
    assert "```sh\nmake bench\n```" in block
    assert "10.0 minutes" in block
    assert "| PostgreSQL | **rainier-queue** | 40,000 | **3,000** | 3,600 |  |" in block
    assert "| PostgreSQL | PgQueuer | 80,000 | 1,000 | 1,200 | 3.00\u00d7 |" in block
    assert "| PostgreSQL | Procrastinate | - | FAILED | - | \u2014 |" in block
    assert "| Redis | **rainier-queue** | - | FAILED | - |  |" in block
    assert "| rainier-queue | Redis | 1.7 | 2.6 |" in block
    assert "| rainier-queue | MySQL/MariaDB | FAILED | FAILED |" in block
    assert "| rainier-queue | Redis | 200,000 | 40.0 | 41.0 | +1.0 |" in block
    assert "![End-to-end jobs/s per system, per backend](bench/results/compare.png)" in block
    # Running it again changes nothing: the block is replaced, not appended to.
    report.write_readme(readme, result(), "bench/results/compare.png")
    assert readme.read_text() == text


def test_only_writing_the_readme_replaces_the_chart_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "ROOT", tmp_path)
    monkeypatch.setattr(report, "README_CHART", tmp_path / "shown.png")
    (tmp_path / "shown.png").write_bytes(b"the full run's chart")
    (tmp_path / "latest.png").write_bytes(b"this run's chart")
    readme = tmp_path / "README.md"
    readme.write_text(f"{START}\n{END}\n")
    report.write_readme(readme, result(), "latest.png")
    assert (tmp_path / "shown.png").read_bytes() == b"this run's chart"
    assert "(shown.png)" in readme.read_text()
    (tmp_path / "latest.png").unlink()
    with pytest.raises(ValueError, match="latest.png is gone"):
        report.write_readme(readme, result(), "latest.png")


def test_machine_reads_cores_memory_and_cpu(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text("MemTotal:       24683584 kB\nMemFree: 1 kB\n")
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Some CPU @ 2GHz\n")
    box = report.machine(tmp_path)
    assert box["memory_gib"] == 23.5
    assert box["cpu"] == "Some CPU @ 2GHz"
    assert report.machine(tmp_path / "missing")["memory_gib"] is None


def test_latency_count_must_land_exactly(tmp_path: Path) -> None:
    path = tmp_path / "samples.txt"
    path.write_text("-1 1.0 1.1\n0 2.0 2.1\n1 3.0 3.1\n2 4.0")  # the last line is unfinished
    seen = count_lines(path)
    assert seen == Counter({-1: 1, 0: 1, 1: 1})
    assert check_counts(seen, 2) is None
    assert check_counts(seen, 3) == "1 jobs never started"
    seen[0] += 1
    assert check_counts(seen, 2) == "1 jobs started more than once"
    assert check_counts(Counter({-1: 1, 0: 1, 5: 1}), 1) == "1 unexpected jobs"
    assert count_lines(tmp_path / "none.txt") == Counter()


def fake_proc(root: Path, tree: dict[int, tuple[int | None, list[int]]]) -> Path:
    """A /proc with pid -> (VmRSS kB or None for a zombie, children)."""
    for pid, (rss, children) in tree.items():
        task = root / str(pid) / "task" / str(pid)
        task.mkdir(parents=True)
        (task / "children").write_text(" ".join(map(str, children)) + (" " if children else ""))
        lines = ["Name:\tpython", "State:\tS (sleeping)"]
        if rss is not None:
            lines.append(f"VmRSS:\t  {rss} kB")
        (root / str(pid) / "status").write_text("\n".join(lines) + "\n")
    return root


def test_rss_sums_a_worker_and_the_children_it_forked(tmp_path: Path) -> None:
    proc = fake_proc(
        tmp_path, {10: (1000, [11, 12]), 11: (200, [13]), 12: (None, []), 13: (30, [])}
    )
    assert rss_kib(10, proc) == 1000
    assert rss_kib(12, proc) is None  # a zombie
    assert rss_kib(99, proc) is None  # gone
    assert sorted(descendants(10, proc)) == [10, 11, 12, 13]
    assert tree_rss_kib([10], proc) == 1230
    assert tree_rss_kib([99], proc) is None


def test_sampler_starts_at_the_first_job_and_ends_on_finish(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, {10: (1000, [])})
    sampler = RssSampler([10], interval=0.0, proc=proc)
    sampler.poll(0)  # nothing has run yet: no sample
    assert sampler.samples == 0
    sampler.poll(1)
    (proc / "10" / "status").write_text("VmRSS:\t 5000 kB\n")
    sampler.poll(500)
    (proc / "10" / "status").write_text("VmRSS:\t 1500 kB\n")
    sampler.finish()
    assert sampler.summary() == {
        "rss_start_kib": 1000,
        "rss_end_kib": 1500,
        "rss_peak_kib": 5000,
        "rss_growth_kib": 500,
        "rss_samples": 3,
    }


def set_cpu(proc: Path, pid: int, comm: str, user: int, system: int, cmdline: str = "") -> None:
    """Write a process's comm, cmdline and a stat line with these utime and stime ticks."""
    (proc / str(pid)).mkdir(parents=True, exist_ok=True)
    (proc / str(pid) / "comm").write_text(comm + "\n")
    (proc / str(pid) / "cmdline").write_bytes(cmdline.encode())
    # The name may hold spaces and parentheses; utime and stime are fields 14 and 15.
    fields = ["S", "1", "1", "1", "0", "-1", "0", "0", "0", "0", "0", str(user), str(system)]
    (proc / str(pid) / "stat").write_text(f"{pid} ({comm} (x) y) " + " ".join(fields) + " 0 0\n")


def test_cpu_per_job_splits_workers_and_server_in_the_steady_window(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, {10: (1000, [11]), 11: (1000, [])})
    set_cpu(proc, 10, "python", 100, 0)
    set_cpu(proc, 11, "python", 50, 10)
    set_cpu(proc, 20, "redis-server", 300, 100, "redis-server 127.0.0.1:6379")
    set_cpu(proc, 21, "redis-server", 999, 999, "redis-server 127.0.0.1:7001")  # another port
    set_cpu(proc, 30, "postgres", 5, 5)
    assert cpu_seconds(11, proc) == 60 / TICK
    assert cpu_seconds(99, proc) is None
    assert server_pids("redis", proc) == [20]
    assert server_pids("sqlite", proc) == []
    now = [0.0]
    window = CpuWindow([10], "redis", [100, 900], proc, clock=lambda: now[0])
    window.poll(50)  # before the window: nothing read
    window.poll(100)
    set_cpu(proc, 10, "python", 100 + TICK, 0)  # one second more in the worker
    set_cpu(proc, 11, "python", 50, 10 + TICK)  # and one in the child it forked
    # half a second in the server
    set_cpu(proc, 20, "redis-server", 300, 100 + TICK // 2, "redis-server 127.0.0.1:6379")
    now[0] = 1.0
    window.poll(950)
    window.poll(1000)  # past the window: not read again
    assert window.summary() == {"worker_cpu_us": 2500.0, "server_cpu_us": 625.0}


def test_cpu_per_job_is_unknown_for_a_window_too_short_to_measure(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, {10: (1000, [])})
    set_cpu(proc, 10, "python", 100, 0)
    window = CpuWindow([10], "sqlite", [100, 900], proc, clock=lambda: 5.0)
    window.poll(1000)  # both marks passed in one look
    assert window.summary() == {"worker_cpu_us": None, "server_cpu_us": None}
    never = CpuWindow([10], "sqlite", [100, 900], proc)
    assert never.summary() == {"worker_cpu_us": None, "server_cpu_us": None}


def test_steady_state_is_the_rate_between_ten_and_ninety_percent() -> None:
    from bench.compare.peers._common import Steady

    steady = Steady(1000)
    steady.poll(50, 1.0)  # start-up: below 10%
    steady.poll(100, 2.0)  # 10% reached
    steady.poll(500, 3.0)
    steady.poll(950, 4.0)  # past 90%
    steady.poll(1000, 9.0)  # a slow tail does not count
    assert steady.seconds() == (800, 2.0)
    short = Steady(1000)
    short.poll(1000, 1.0)  # everything seen at once: no window to measure
    assert short.seconds() is None


def test_latency_summary_gives_percentiles_only_with_an_exact_count(tmp_path: Path) -> None:
    path = tmp_path / "samples.txt"
    lines = ["-1 0.0 0.5"] + [f"{seq} {seq}.0 {seq}.{seq + 1:03d}" for seq in range(5)]
    path.write_text("\n".join(lines) + "\n")
    out = summary(path, 5)
    assert out["ok"] is True
    assert out["samples"] == 5
    assert out["p50_ms"] == pytest.approx(3.0)
    assert out["max_ms"] == pytest.approx(5.0)
    path.write_text("\n".join([*lines, "2 2.0 2.500"]) + "\n")  # job 2 ran twice
    twice = summary(path, 5)
    assert twice["ok"] is False
    assert twice["error"] == "1 jobs started more than once"


@pytest.mark.parametrize(
    ("argv", "typed", "shown"),
    [
        ([], "make bench", "make bench"),
        ([], "make bench BENCH_ARGS='--write-readme'", "make bench"),
        (
            [],
            "make bench BENCH_ARGS='--rounds 5 --write-readme /tmp/R.md'",
            ("make bench BENCH_ARGS='--rounds 5'"),
        ),
        (
            ["--jobs", "10", "--write-readme", "--rounds", "1"],
            "",
            (".venv/bin/python -m bench.compare.run --jobs 10 --rounds 1"),
        ),
        (
            ["--write-readme", "x.md", "--jobs", "10"],
            "",
            (".venv/bin/python -m bench.compare.run --jobs 10"),
        ),
        (["--write-readme=x.md"], "", ".venv/bin/python -m bench.compare.run"),
    ],
)
def test_the_command_shown_leaves_out_write_readme(argv: list[str], typed: str, shown: str) -> None:
    from bench.compare.run import command_line

    assert command_line(argv, typed) == shown


def test_drain_marks_give_the_rate_at_the_start_and_at_the_end() -> None:
    from bench.compare.peers._common import Marks

    marks = Marks(10_000)
    for count, at in ((100, 1.0), (1000, 2.0), (9000, 10.0), (10_000, 12.0)):
        marks.poll(count, at)
    assert marks.rates() == {"start_jobs_s": 900.0, "end_jobs_s": 500.0}
    unfinished = Marks(10_000)
    unfinished.poll(5000, 1.0)
    assert unfinished.rates() == {}


def test_grid_contenders_are_the_peers_near_the_fastest_and_none_failed() -> None:
    from bench.compare.grid import contenders

    base = [
        row(OURS, "redis", 9000.0),
        row("huey", "redis", 6000.0),
        row("taskiq", "redis", 4000.0),
        row("dramatiq", "redis", 3900.0),
        row("rq", "redis", 400.0),
        row("pgqueuer", "postgres", None),
        row("procrastinate", "postgres", 450.0),
    ]
    assert contenders(base, limit=2) == {
        ("huey", "redis"),
        ("taskiq", "redis"),
        ("procrastinate", "postgres"),
    }
    assert contenders(base, limit=1) == {("huey", "redis"), ("procrastinate", "postgres")}
    assert contenders([], limit=2) is None, "no run to choose by: every peer"


def grid_result() -> dict[str, Any]:
    def cell(system: str, backend: str, e2e: float | None, setting: str, **more: Any) -> Any:
        return {**row(system, backend, e2e), "setting": setting, "jobs": 20_000, **more}

    return result(
        grid=[
            cell(OURS, "redis", 12_000.0, "concurrency 8"),
            cell("huey", "redis", 4000.0, "concurrency 8", enqueue_jobs_s=8000.0),
            cell(OURS, "redis", 9000.0, "concurrency 32"),
            cell("taskiq", "redis", 6000.0, "concurrency 32"),
        ],
        io=[
            {
                **row(OURS, "redis", 5000.0),
                "setting": "I/O-bound",
                "jobs": 10_000,
                "concurrency": 64,
            },
            {
                **row("saq", "redis", 2000.0),
                "setting": "I/O-bound",
                "jobs": 10_000,
                "concurrency": 64,
            },
        ],
        enqueue=[
            {
                "backend": "redis",
                "ok": True,
                "push_many_jobs_s": 100_000.0,
                "push_many_built_jobs_s": 84_000.0,
                "dispatch_many_jobs_s": 80_000.0,
                "push_over_dispatch": 1.25,
                "built_over_dispatch": 1.05,
            },
        ],
        backlog=[
            {
                **row(OURS, "redis", 7000.0),
                "jobs": 1_000_000,
                "concurrency": 32,
                "start_jobs_s": 10_000.0,
                "end_jobs_s": 9000.0,
            },
            {
                **row(OURS, "postgres", 5000.0),
                "jobs": 1_000_000,
                "concurrency": 32,
                "start_jobs_s": 6000.0,
                "end_jobs_s": 3000.0,
                "table_bytes": 2**20,
                "index_bytes": 2**21,
                "hot_update_share": 0.9,
            },
        ],
    )


def test_the_grid_gives_ours_over_the_fastest_peer_at_every_setting() -> None:
    from bench.compare.grid_report import grid_lines

    lines = [line for line in grid_lines(grid_result()) if line[0] == "redis"]

    settings = {line[1]: line[2:] for line in lines}
    assert settings["end to end, 5,000 jobs, c8 (today's)"] == ("FAILED", "Huey", "500", "-")
    assert settings["end to end, 20,000 jobs, c8"] == ("12,000", "Huey", "4,000", "3.00\u00d7")
    assert settings["end to end, 20,000 jobs, c32"] == ("9,000", "taskiq", "6,000", "1.50\u00d7")
    assert settings["end to end, 10,000 jobs, I/O-bound (20 ms), c64"][-1] == "2.50\u00d7"
    assert settings["enqueue through dispatch_many"] == ("80,000", "Huey", "8,000", "10.00\u00d7")
    # Latency is the peer's milliseconds over ours; no peer ran, so no ratio.
    assert settings["pickup latency p50, ms (peer ÷ ours)"] == ("1.7", "none ran", "-", "-")


def test_the_backlog_table_compares_the_end_of_a_drain_with_its_start_and_the_small_cell() -> None:
    """The small cell is the grid's at the backlog drain's own concurrency (32 here, not 8)."""
    from bench.compare.grid_report import backlog_lines

    redis, postgres = backlog_lines(grid_result())

    assert redis[:7] == [
        "Redis",
        "1,000,000",
        "10,000",
        "9,000",
        "0.90\u00d7",
        "10,800",
        "0.93\u00d7",
    ]
    assert postgres[5] == "-", "no PostgreSQL cell in the grid: nothing to compare with"
    assert postgres[4] == "0.50\u00d7"
    assert postgres[7] == "table 1.0 MiB, indexes 2.0 MiB, HOT updates 90%"


def test_the_readme_block_carries_the_grid_tables(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"{START}\n{END}\n")

    report.write_readme(readme, grid_result(), None)

    block = readme.read_text()
    assert "| Redis | end to end, 20,000 jobs, c32 | 9,000 | taskiq | 6,000 | 1.50\u00d7 |" in block
    assert "| Redis | 1,000,000 | 10,000 | 9,000 | 0.90\u00d7 |" in block
    assert "| Redis | 100,000 | 84,000 | 80,000 | 1.25\u00d7 | 1.05\u00d7 |" in block


def test_the_enqueue_table_gives_both_push_rates_and_both_ratios_to_dispatch() -> None:
    from bench.compare.grid_report import enqueue_lines

    [line] = enqueue_lines(grid_result())

    assert line == ["Redis", "100,000", "84,000", "80,000", "1.25\u00d7", "1.05\u00d7"]


def test_the_readme_says_where_the_minutes_went(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"{START}\n{END}\n")

    report.write_readme(readme, result(workload_s={"throughput": 540.0, "backlog": 60.0}), None)

    assert "which took 10.0 minutes (throughput 9.0, backlog 1.0). " in readme.read_text()


def test_a_peer_stopped_far_behind_is_shown_as_a_bound_not_a_failure() -> None:
    """A peer stopped by the FAR rule has no rate, only an upper bound: the tables say
    "below X" for it and "above Y" for ours over it, and never call it FAILED."""
    from bench.compare.grid_report import grid_lines

    stopped = {
        **row("huey", "mysql", None),
        "runs": 1,
        "stopped_below_jobs_s": 250.0,
        "setting": "concurrency 32",
        "jobs": 20_000,
    }
    ours = {**row(OURS, "mysql", 5000.0), "setting": "concurrency 32", "jobs": 20_000}

    cells = {c[0]: c for c in report.throughput_cells([ours, stopped], "mysql")}
    assert cells["huey"][2:6] == ["< 250", "-", "stopped", "> 20.00x"]
    assert "above 20.00x" in report.caption([ours, stopped], "mysql")

    lines = grid_lines(result(grid=[ours, stopped]))
    [c32] = [line for line in lines if line[1] == "end to end, 20,000 jobs, c32"]
    assert c32[2:] == ("5,000", "Huey", "< 250 (stopped)", "> 20.00\u00d7")
