# SPDX-License-Identifier: MIT
"""Where the PostgreSQL claim starts its scan: past the last row taken, and from the
head again often enough that nothing behind that point waits for long."""

from __future__ import annotations

import time

import pytest

from rainier_queue.drivers.database.postgres.floor import Floors


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    return now


def test_a_queue_never_claimed_is_claimed_from_the_head(clock: list[float]) -> None:
    assert Floors().start("default") is None


def test_the_next_claim_starts_past_the_last_row_taken(clock: list[float]) -> None:
    floors = Floors(refresh=5.0)
    floors.claimed("default", [(10, 3), (10, 7), (9, 12)], from_head=True)

    assert floors.start("default") == (10, 7)
    assert floors.start("other") is None


def test_a_claim_from_the_floor_moves_it_on_but_does_not_make_it_fresh(
    clock: list[float],
) -> None:
    floors = Floors(refresh=5.0)
    floors.claimed("default", [(10, 7)], from_head=True)
    clock[0] += 4.0
    floors.claimed("default", [(11, 8)], from_head=False)
    assert floors.start("default") == (11, 8)

    clock[0] += 1.5  # 5.5 s since the head was last read

    assert floors.start("default") is None


def test_a_claim_from_the_head_that_found_nothing_forgets_the_floor(clock: list[float]) -> None:
    floors = Floors(refresh=5.0)
    floors.claimed("default", [(10, 7)], from_head=True)
    floors.claimed("default", [], from_head=False)
    assert floors.start("default") == (10, 7)

    floors.claimed("default", [], from_head=True)

    assert floors.start("default") is None


def test_claims_started_while_one_reads_the_head_go_on_from_the_floor(
    clock: list[float],
) -> None:
    floors = Floors(refresh=5.0)
    floors.claimed("default", [(10, 7)], from_head=True)
    clock[0] += 6.0

    assert floors.start("default") is None  # this claim reads the head...
    clock[0] += 0.05
    assert floors.start("default") == (10, 7)  # ...so one sent before it returns need not


def test_the_head_is_read_again_a_refresh_after_a_head_claim_that_never_returned(
    clock: list[float],
) -> None:
    floors = Floors(refresh=5.0)
    floors.claimed("default", [(10, 7)], from_head=True)
    clock[0] += 6.0
    assert floors.start("default") is None  # sent, and lost with its connection

    clock[0] += 5.5

    assert floors.start("default") is None
