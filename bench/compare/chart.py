# SPDX-License-Identifier: MIT
"""The comparison at a glance: end-to-end jobs/s per system, bars grouped by backend (PNG).

A table of forty numbers hides what one picture shows: where we stand beside
each peer on each backend. Run by the peers' venv, where matplotlib is
installed (it is no dependency of the project):

    bench/.peers-venv/bin/python -m bench.compare.chart bench/results/latest.json out.png

Reads the throughput rows of one bench.compare result (latest.json). Each
backend is a group of bars, ours first and drawn in one colour everywhere; a
system whose runs failed gets no bar, only the word FAILED, since a failed
run has no number.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

OURS = "rainier-queue"
ORDER = ("memory", "sqlite", "postgres", "mysql", "redis", "kafka", "nats", "rabbitmq", "sqs")
NAMES = {
    "memory": "memory\n(in-process)",
    "sqlite": "SQLite",
    "postgres": "PostgreSQL",
    "mysql": "MySQL/MariaDB",
    "redis": "Redis",
    "kafka": "Kafka",
    "nats": "NATS\nJetStream",
    "rabbitmq": "RabbitMQ",
    "sqs": "SQS\n(moto)",
}
OURS_COLOUR = "#d62728"


def draw(result: dict[str, Any], out: Path) -> None:
    rows: list[dict[str, Any]] = result["throughput"]
    names: dict[str, str] = result.get("names", {})
    backends = sorted(
        {r["backend"] for r in rows},
        key=lambda b: (b not in ORDER, ORDER.index(b) if b in ORDER else 0, b),
    )
    peers = sorted({r["system"] for r in rows if r["system"] != OURS})
    palette = plt.get_cmap("tab10").colors
    colours = {OURS: OURS_COLOUR}
    others = [c for c in palette if c != palette[3]]  # tab10's red is ours
    for i, name in enumerate(peers):
        colours[name] = others[i % len(others)]

    fig, ax = plt.subplots(figsize=(12, 5.5), dpi=110)
    width = 0.8
    ticks, labels = [], []
    x = 0.0
    top = max((r["e2e_jobs_s"] or 0 for r in rows if r["ok"]), default=1) or 1
    seen: set[str] = set()
    for backend in backends:
        group = [r for r in rows if r["backend"] == backend]
        group.sort(key=lambda r: (r["system"] != OURS, -(r["e2e_jobs_s"] or 0)))
        for i, r in enumerate(group):
            pos = x + i * width
            label = None if r["system"] in seen else names.get(r["system"], r["system"])
            seen.add(r["system"])
            if r["ok"] and r["e2e_jobs_s"]:
                ax.bar(pos, r["e2e_jobs_s"], width * 0.9, color=colours[r["system"]], label=label)
                ax.text(
                    pos,
                    r["e2e_jobs_s"] + top * 0.01,
                    f"{r['e2e_jobs_s']:,.0f}",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    rotation=90,
                )
            else:
                ax.bar(pos, 0, width * 0.9, color=colours[r["system"]], label=label)
                ax.text(
                    pos,
                    top * 0.02,
                    "FAILED",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    rotation=90,
                    color="black",
                )
        ticks.append(x + (len(group) - 1) * width / 2)
        tick = NAMES.get(backend, backend)
        partitions = next((r["partitions"] for r in group if r.get("partitions")), None)
        labels.append(f"{tick}\n({partitions} partitions)" if partitions else tick)
        x += len(group) * width + 1.0
    ax.set_xticks(ticks, labels)
    ax.set_ylabel("end-to-end jobs/s (higher is better)")
    p = result.get("params", {})
    box = result.get("machine", {})
    ax.set_title(
        f"{p.get('jobs', '?'):,} jobs, {p.get('processes', '?')} worker processes (memory: 1) "
        f"x concurrency {p.get('concurrency', '?')}, median of {p.get('rounds', '?')} rounds; "
        f"{box.get('cores', '?')} cores, {result.get('date', '')}",
        fontsize=10,
    )
    ax.set_ylim(0, top * 1.18)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m bench.compare.chart RESULT.json OUT.png")
    draw(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))


if __name__ == "__main__":
    main()
