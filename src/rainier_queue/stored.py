# SPDX-License-Identifier: MIT
"""Reading storage into jobs: moved to `envelope.reading`; this old path re-exports it.

The stored form became one package (`rainier_queue.envelope`); code that
imports `rainier_queue.stored` keeps working, and new code imports
`rainier_queue.envelope.reading`.
"""

from __future__ import annotations

from .envelope.reading import *  # noqa: F403
from .envelope.reading import __all__ as __all__
