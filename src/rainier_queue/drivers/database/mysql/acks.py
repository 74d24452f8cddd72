# SPDX-License-Identifier: MIT
"""Acknowledging a batch on MySQL in one DELETE, and reading who got what from its count.

MySQL has no `DELETE ... RETURNING`, so the portable way to tell each
reservation whether its row was still its own is to lock the rows first
(`SELECT id, reservation_token ... FOR UPDATE`), compare, and delete the
matches: two statements, and a row sent back and decoded for every job.
aiomysql decodes rows in pure Python, so that read was a fifth of the
worker's client CPU per job in a busy drain.

Almost always every row is still its reservation's. So the batch is
deleted by its rows' seqs (their primary key, which each reservation this
queue hands out carries as its handle), each fenced by its own token in
the same statement, and the count of rows deleted says whether all were
ours. Only when it falls short (a lease lapsed and another worker took a
row, or a row was settled already) is that transaction rolled back, so
nothing of it stays, and the batch is acknowledged the portable way, which
answers for each reservation. A batch naming a row twice, or a reservation
made elsewhere (no seq), goes the portable way at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from ....queue import Reservation


class NotAllOurs(Exception):
    """The batch's DELETE removed fewer rows than it named: roll it back, ask row by row."""


def seqs_of(reservations: Sequence[Reservation]) -> list[int] | None:
    """Each reservation's row seq, or None if one lacks it or two name the same row."""
    seqs: list[int] = []
    for reservation in reservations:
        handle = reservation.handle
        if type(handle) is not int:
            return None
        seqs.append(handle)
    if len(set(seqs)) != len(seqs):
        return None
    return seqs


def delete_by_seq(jobs: str, seqs: Sequence[int]) -> str:
    """The DELETE of the rows `seqs` that still hold their reservation's token.

    The seqs are whole numbers from the rows themselves and go into the text
    (`%d`); the tokens, one per seq in the same order, are its parameters.
    """
    cases = " ".join(f"WHEN {seq:d} THEN %s" for seq in seqs)
    listed = ", ".join(f"{seq:d}" for seq in seqs)
    return (
        f"DELETE FROM {jobs} WHERE seq IN ({listed}) AND reservation_token = CASE seq {cases} END"
    )


__all__ = ["NotAllOurs", "delete_by_seq", "seqs_of"]
