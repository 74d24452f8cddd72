# SPDX-License-Identifier: MIT
"""Reservation tokens: unique per delivery, in this process and in a forked child."""

from __future__ import annotations

import os

import pytest

from rainier_queue.queue import new_token


def test_tokens_in_one_process_never_repeat() -> None:
    tokens = [new_token() for _ in range(20_000)]
    assert len(set(tokens)) == len(tokens)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_draws_tokens_of_its_own() -> None:
    before = new_token()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: send one token back, then leave without pytest's teardown
        try:
            os.write(write_end, new_token().encode())
        finally:
            os._exit(0)
    os.close(write_end)
    child = os.read(read_end, 200).decode()
    os.close(read_end)
    os.waitpid(pid, 0)
    parent = new_token()

    # Same count behind both, so only a fresh prefix tells them apart.
    assert child != parent
    assert child[:24] != parent[:24], "the child kept its parent's prefix"
    assert parent[:24] == before[:24]
