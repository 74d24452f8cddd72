# SPDX-License-Identifier: MIT
"""The driver puts its classes under aiormq's names only over the aiormq it was written for,
and only where aiormq's own class is still there (aiormq_seams.py)."""

from __future__ import annotations

import aiormq.connection
import pytest

from rainier_queue.drivers.rabbitmq import aiormq_seams


class Theirs:
    pass


class Ours(Theirs):
    pass


class Someone(Theirs):
    """Another library's replacement, put there first."""


def test_ours_goes_in_over_theirs_and_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aiormq.connection, "Seam", Theirs, raising=False)
    assert aiormq_seams.put_in("Seam", Theirs, Ours)
    assert aiormq.connection.Seam is Ours  # type: ignore[attr-defined]
    assert aiormq_seams.put_in("Seam", Theirs, Ours)  # again: already ours


def test_what_someone_else_put_there_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aiormq.connection, "Seam", Someone, raising=False)
    assert not aiormq_seams.put_in("Seam", Theirs, Ours)
    assert aiormq.connection.Seam is Someone  # type: ignore[attr-defined]


def test_another_aiormq_keeps_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aiormq.connection, "Seam", Theirs, raising=False)
    monkeypatch.setattr(aiormq_seams, "fits", lambda: False)
    assert not aiormq_seams.put_in("Seam", Theirs, Ours)
    assert aiormq.connection.Seam is Theirs  # type: ignore[attr-defined]


def test_the_installed_aiormq_is_the_one_written_for() -> None:
    assert aiormq_seams.fits()
