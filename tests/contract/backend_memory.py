# SPDX-License-Identifier: MIT
from __future__ import annotations

from .backends import Backend

BACKEND = Backend("memory", lambda tmp, ns: "memory://")
