# SPDX-License-Identifier: MIT
"""The `rainier-queue` command line: workers, inspection and repair from a shell.

A leaf of the package: it uses the library's public API, and nothing in the
library imports it, so an application that never runs the CLI never pays
for click or rich at import time. The entry point is `cli.app:main`.
"""
