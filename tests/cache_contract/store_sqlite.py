# SPDX-License-Identifier: MIT
from __future__ import annotations

from .stores import Store

STORE = Store("sqlite", lambda tmp, ns: f"sqlite:///{tmp / 'cache.db'}?prefix={ns}_")
