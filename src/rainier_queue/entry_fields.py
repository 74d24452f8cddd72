# SPDX-License-Identifier: MIT
"""The checks on stored fields: moved to `envelope.fields`; this old path re-exports it.

The stored form became one package (`rainier_queue.envelope`); code that
imports `rainier_queue.entry_fields` keeps working, and new code imports
`rainier_queue.envelope.fields`.
"""

from __future__ import annotations

from .envelope.fields import *  # noqa: F403
