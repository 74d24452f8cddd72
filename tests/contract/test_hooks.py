# SPDX-License-Identifier: MIT
"""Every backend gives each hook or says why not: a new driver finds out here first."""

from __future__ import annotations

from pathlib import Path

import pytest

from .backends import ABILITIES, BACKENDS, HOOKS, UNEXPLAINED, Backend


def test_every_backend_gives_each_hook_or_says_why_not() -> None:
    unexplained = [
        f"{backend.name}: {hook}"
        for backend in BACKENDS.values()
        for hook in HOOKS
        if backend.missing(hook) == UNEXPLAINED
    ]
    assert unexplained == [], "give these hooks, or a reason in `lacks`"


def test_a_reason_in_lacks_is_why_a_hook_is_missing_and_none_is_unexplained() -> None:
    def url(tmp: Path, namespace: str) -> str:
        return "memory://"

    bare = Backend("bare", url, backlog=None)
    explained = Backend("explained", url, backlog=None, lacks={"cut": "no wire"})

    assert bare.missing("cut") == UNEXPLAINED
    assert bare.missing("backlog") == UNEXPLAINED
    assert bare.missing("processes") is None, "an ability is had unless `lacks` says otherwise"
    assert explained.missing("cut") == "no wire"
    assert explained.missing("secret_url") == UNEXPLAINED


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_a_backend_field_or_an_ability(hook: str) -> None:
    fields = set(Backend.__dataclass_fields__)
    assert hook in fields or hook in ABILITIES
