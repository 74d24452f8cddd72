# SPDX-License-Identifier: MIT
from __future__ import annotations

from .backends import Backend

BACKEND = Backend("sqlite", lambda tmp, ns: f"sqlite:///{tmp / ns}.db")
