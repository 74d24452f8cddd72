# SPDX-License-Identifier: MIT
"""Packing a job into its envelope: moved to `envelope.packing`; this old path re-exports it.

The stored form became one package (`rainier_queue.envelope`); code that
imports `rainier_queue.packing` keeps working, and new code imports
`rainier_queue.envelope.packing`.
"""

from __future__ import annotations

from .envelope.packing import *  # noqa: F403
from .envelope.packing import __all__ as __all__
