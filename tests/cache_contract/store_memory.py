# SPDX-License-Identifier: MIT
from __future__ import annotations

from .stores import Store

STORE = Store("memory", lambda tmp, ns: "memory://")
