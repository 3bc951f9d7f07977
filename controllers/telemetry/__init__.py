"""Telemetry: how the runtime's reports reach Redis.

The runtime reports every step to an ``Observer`` (``controllers.observer``), the only bridge between
the runtime and the dashboard; this package implements it. ``TelemetryObserver`` turns hook calls into
protocol records, and ``RedisPublisher`` batches them into frames on its own thread, so the runtime's
hot path never waits on I/O. Nothing here imports the runtime packages: the layering is
``runtime → observer ← telemetry``.
"""
