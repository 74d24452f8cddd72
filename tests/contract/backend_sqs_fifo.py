# SPDX-License-Identifier: MIT
"""SQS FIFO queues in the contract suite: as backend_sqs.py, every queue a `.fifo` one."""

from __future__ import annotations

from .backend_sqs import make_backend

BACKEND = make_backend("sqs_fifo", fifo=True)
