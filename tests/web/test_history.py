# SPDX-License-Identifier: MIT
"""The overview's last hour: samples at most one per interval, an hour kept, and the trend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rainier_queue.web.history import History, sparkline

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_samples_are_taken_once_per_interval_and_kept_for_an_hour() -> None:
    history = History(every=timedelta(seconds=10))

    assert history.due("web", START)
    history.add("web", 5, START)
    assert not history.due("web", START + timedelta(seconds=9))
    assert history.due("web", START + timedelta(seconds=10))
    for minute in range(1, 71):
        history.add("web", minute, START + timedelta(minutes=minute))

    kept = history.of("web")
    assert kept[0].at == START + timedelta(minutes=10)
    assert kept[-1].depth == 70


def test_the_trend_is_the_depths_change_a_minute_over_the_last_five() -> None:
    history = History()
    assert history.per_minute("web") is None
    for minute in range(11):
        history.add("web", 100 - 3 * minute, START + timedelta(minutes=minute))

    assert history.per_minute("web") == -3.0


def test_the_sparkline_needs_two_samples_and_spans_its_width_from_the_first() -> None:
    history = History()
    history.add("web", 0, START)
    assert sparkline(history.of("web")) == ""
    history.add("web", 4, START + timedelta(minutes=10))
    history.add("web", 2, START + timedelta(minutes=40))

    points = sparkline(history.of("web"), width=120, height=24).split()
    assert points == ["0.0,23.0", "30.0,1.0", "120.0,12.0"]
