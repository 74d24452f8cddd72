# SPDX-License-Identifier: MIT
"""The toolkit's fencing ledger (drivers/fencing.py): nothing is handed out past a deadline.

The NATS and SQS drivers hold every delivery in it; their own tests
(tests/drivers/test_nats_fencing.py, test_sqs_driver.py) hold it against the
real servers. These hold the ledger alone, with leases that started long ago
or just now, so no test waits for a clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta

import pytest

from rainier_queue.drivers.fencing import Ledger, margin
from rainier_queue.errors import LeaseLost

LEASE = timedelta(seconds=30)


@dataclass(slots=True)
class Held:
    queue: str
    lease: float = 0.0
    deadline: float = 0.0


def test_a_lease_of_a_tenth_of_its_length_at_most_five_seconds_is_kept_as_margin() -> None:
    assert margin(timedelta(seconds=2)) == pytest.approx(0.2)
    assert margin(timedelta(minutes=10)) == 5.0


def test_a_delivery_is_handed_out_until_its_deadline_less_the_margin() -> None:
    ledger: Ledger[Held] = Ledger("the broker")
    started = time.monotonic()

    deadline = ledger.hold("t", held := Held("default"), started, LEASE)

    assert deadline == pytest.approx(started + 30 - 3)
    assert ledger.current("t", "job-1") is held
    assert ledger.held("default") == [held]
    assert ledger.held("other") == []


def test_a_lapsed_delivery_is_lease_lost_naming_the_broker_and_forgotten() -> None:
    ledger: Ledger[Held] = Ledger("the broker")
    ledger.hold("t", Held("default"), time.monotonic() - 60, LEASE)

    with pytest.raises(LeaseLost, match="nothing was sent to the broker"):
        ledger.current("t", "job-1")

    assert ledger.held("default") == []
    with pytest.raises(LeaseLost, match="no longer reserved by this worker"):
        ledger.current("t", "job-1")


def test_a_ledger_that_keeps_lapsed_deliveries_still_refuses_them() -> None:
    ledger: Ledger[Held] = Ledger("the broker", keep_lapsed=True)
    ledger.hold("t", held := Held("default"), time.monotonic() - 60, LEASE)

    with pytest.raises(LeaseLost, match="lease ran out"):
        ledger.current("t", "job-1")

    assert ledger.held("default") == [held]
    assert ledger.get("t") is held


def test_a_confirmed_renewal_moves_the_deadline_from_when_it_was_sent() -> None:
    ledger: Ledger[Held] = Ledger("the broker")
    ledger.hold("t", held := Held("default"), time.monotonic() - 60, LEASE)
    sent = time.monotonic()

    deadline = ledger.renewed("t", sent)

    assert deadline == held.deadline == pytest.approx(sent + 27)
    assert ledger.current("t", "job-1") is held


def test_a_renewal_confirmed_after_the_settle_changes_nothing() -> None:
    ledger: Ledger[Held] = Ledger("the broker")
    ledger.hold("t", Held("default"), time.monotonic(), LEASE)
    ledger.done("t")

    assert ledger.renewed("t", time.monotonic()) is None
    assert ledger.tokens() == []
