# SPDX-License-Identifier: MIT
"""`cancel ID`, run as a user runs it: a waiting job is removed and `job` says cancelled; a
connection that cannot cancel refuses, saying why."""

from __future__ import annotations

from .harness import Cli, no_traceback
from .test_observing import dispatched


def test_cancelling_a_waiting_job_removes_it_and_job_says_cancelled(cli: Cli) -> None:
    doomed = dispatched(cli, "note", {"text": "never"})
    kept = dispatched(cli, "note", {"text": "still"})

    cancelled = cli("cancel", doomed)
    shown = cli("job", doomed, "--json")
    again = cli("cancel", doomed)

    assert cancelled.code == 0, cancelled.output
    assert f"job {doomed} was waiting and is removed" in cancelled.stdout
    assert shown.json()["status"] == "cancelled"
    assert "failed or was cancelled already" in again.stdout
    assert cli.sizes("default") == {"default": 1}
    assert cli("job", kept, "--json").json()["status"] == "queued"


def test_cancelling_on_a_connection_that_cannot_is_refused_saying_why() -> None:
    inline = Cli("sync://")

    refused = inline("cancel", "01234567-89ab-7def-8123-456789abcdef")

    assert refused.code == 2, refused.output
    assert "cannot cancel a job: the sync driver" in refused.stderr
    assert no_traceback(refused)
