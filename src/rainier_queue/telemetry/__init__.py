# SPDX-License-Identifier: MIT
"""Instruments on the instrument seam: Prometheus metrics and OpenTelemetry traces.

Why a package of its own: both are optional (`rainier-queue[prometheus]`,
`rainier-queue[otel]`), both are built only from what `instrument.py`
shows (port calls, push scopes, job scopes), and neither may cost a
worker or a dispatcher anything when it is not asked for. So nothing here
is imported by the library itself: the application, or `rainier-queue
work`, imports `telemetry.metrics` or `telemetry.tracing` when it wants
them, and a missing client library is a clear error naming the extra
(`extras.py`).
"""
