# SPDX-License-Identifier: MIT
"""Reading a worker's metrics over HTTP, as Prometheus would."""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

PATIENCE = 120.0
"""Seconds a worker may take to get somewhere before the test gives up (not a timing check)."""

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def metrics_url(process: subprocess.Popen[str]) -> str:
    """The URL the worker said it serves its metrics on (read from its stderr)."""
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        found = re.search(r"serving metrics on (http://\S+)", line)
        if found:
            return found.group(1)
    raise AssertionError("the worker ended without serving metrics:\n" + "".join(seen))


def wait_for_lines(process: subprocess.Popen[str], text: str, count: int) -> None:
    """Read the process's stderr until `text` has appeared on `count` more lines."""
    assert process.stderr is not None
    seen = 0
    for line in process.stderr:
        seen += text in line
        if seen == count:
            return
    raise AssertionError(f"the process ended before {count} lines said {text!r}")


def scrape(url: str) -> Samples:
    """Every sample at `url`, by name and labels."""
    with urllib.request.urlopen(url, timeout=30) as answer:
        text = answer.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample `name` with exactly `labels`; 0 when there is none (a counter not yet seen)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def scrape_until(url: str, ready: Callable[[Samples], bool]) -> Samples:
    """Scrape until `ready` says the workload is done; the last scrape."""
    deadline = time.monotonic() + PATIENCE
    while True:
        samples = scrape(url)
        if ready(samples):
            return samples
        if time.monotonic() > deadline:
            raise AssertionError(f"the workload did not finish; last scrape: {samples}")
        time.sleep(0.1)  # a poll's pause between scrapes, not a wait standing in for an event
