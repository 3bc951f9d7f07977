"""Telemetry: how the runtime reports every step, and how those reports reach Redis.

``Observer`` is the only bridge between the runtime and the dashboard. The runtime calls its hooks
synchronously on the hot path; the default ``Observer`` does nothing, so an unobserved controller
pays one method call per step. ``RedisPublisher`` batches records into frames on its own thread.
"""

from controllers.telemetry.observer import NOOP_OBSERVER, Observer

__all__ = ["NOOP_OBSERVER", "Observer"]
