# SPDX-License-Identifier: MIT
"""`pause`, `resume`, and what `size` and a draining `work` make of a paused queue."""

from __future__ import annotations

from .harness import Cli, no_traceback


def test_a_paused_queue_takes_dispatches_shows_as_paused_and_is_left_by_a_drain(
    cli: Cli,
) -> None:
    paused = cli("pause", "emails")
    again = cli("pause", "emails")
    dispatched = cli("dispatch", "note", "--payload", '{"text": "a"}', "--queue", "emails")

    assert paused.code == 0, paused.output
    assert "paused queue `emails`" in paused.stdout
    assert "was paused already" in again.stdout
    assert dispatched.code == 0, dispatched.output
    states = cli("size", "--json", "--states", "emails", "default")
    assert states.json() == {
        "emails": {"waiting": 1, "delayed": 0, "reserved": 0, "paused": True},
        "default": {"waiting": 0, "delayed": 0, "reserved": 0, "paused": False},
    }
    assert "emails (paused)" in cli("size", "emails").stdout
    drained = cli("work", "--queue", "emails", "--once")
    assert drained.code == 5, drained.output  # work left, and said so
    assert "left on paused queues: 1 job(s) on `emails`" in drained.stderr
    assert cli.sizes("emails") == {"emails": 1}

    resumed = cli("resume", "emails")
    not_paused = cli("resume", "emails")

    assert "resumed queue `emails`" in resumed.stdout
    assert "was not paused" in not_paused.stdout
    assert cli("work", "--queue", "emails", "--once").code == 0
    assert cli.sizes("emails") == {"emails": 0}


def test_pausing_on_a_connection_that_cannot_is_refused_saying_why() -> None:
    inline = Cli("sync://")

    refused = inline("pause", "emails")

    assert refused.code == 2, refused.output
    assert "cannot pause a queue: the sync driver" in refused.stderr
    assert no_traceback(refused)
