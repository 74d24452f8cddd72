# SPDX-License-Identifier: MIT
"""A CLI worker keeps limits in the connection's own database, and `explain` reads them."""

from __future__ import annotations

import json

from .harness import Cli

APP = "tests.cli.sample_limited_jobs:registry"


def test_a_worker_sets_aside_a_job_over_its_rate_and_explain_says_when_it_fits(
    db_url: str,
) -> None:
    cli = Cli(db_url, app=APP)
    ids = []
    for _ in range(2):
        sent = cli("dispatch", "invoice", "--payload", json.dumps({"tenant": "7"}))
        assert sent.code == 0, sent.output
        ids.append(sent.stdout.strip())

    drained = cli("work", "--stop-when-empty", "--concurrency", "2")
    answers = [cli("explain", job_id, "--json") for job_id in ids]

    # One ran; the other waits an hour for its tenant's next start, so the drain leaves it.
    assert drained.code == 5, drained.output
    assert "succeeded 1, retried 0, failed 0" in drained.stdout
    assert "1 set aside over their key's limit" in drained.stdout
    codes = sorted(answer.json()["code"] for answer in answers)
    assert "rate_limited" in codes, [a.output for a in answers]
    limited = next(a.json() for a in answers if a.json()["code"] == "rate_limited")
    assert "key `tenant:7` may start 1 job(s) per 1h" in limited["causes"][0]["says"]
    assert cli.sizes("default")["default"] == 1
