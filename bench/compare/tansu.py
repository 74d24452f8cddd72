# SPDX-License-Identifier: MIT
"""The Kafka row's broker, which lives in `bench/tansu.py` since the CPU-per-job benchmarks
start it too (they must not import the comparison, which imports them)."""

from __future__ import annotations

from ..tansu import TANSU, Tansu, binary

__all__ = ["TANSU", "Tansu", "binary"]
