"""Workqueues and rate limiters, after client-go ``util/workqueue``.

``Queue`` deduplicates keys and never hands one key to two workers; ``DelayingQueue`` adds keys
later; ``RateLimitingQueue`` adds them after a delay chosen by a rate limiter. Every class takes an
injectable clock and Observer.
"""

from controllers.workqueue.delaying import DelayingQueue
from controllers.workqueue.queue import Queue
from controllers.workqueue.rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
    describe_rate_limiter,
)
from controllers.workqueue.rate_limiting import RateLimitingQueue

__all__ = [
    "BucketRateLimiter",
    "DelayingQueue",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "Queue",
    "RateLimiter",
    "RateLimitingQueue",
    "default_controller_rate_limiter",
    "describe_rate_limiter",
]
