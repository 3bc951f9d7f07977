"""The reconcile loop, after controller-runtime: write a ``Reconciler``; a ``Controller`` feeds it
``Request``s from watched informers through a rate-limited workqueue and applies the ``Result``.
"""

from controllers.metrics import MetricsObserver
from controllers.reconcile.controller import Controller, ControllerMetrics
from controllers.reconcile.handlers import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    EventHandler,
)
from controllers.reconcile.leader_election import KubernetesLeaseLock, LeaderElector, LeaseLock
from controllers.reconcile.manager import Manager, Runnable
from controllers.reconcile.predicates import GenerationChangedPredicate, Predicate, ResourceVersionChangedPredicate
from controllers.reconcile.request import Reconciler, Request, Result, TerminalError

__all__ = [
    "Controller",
    "ControllerMetrics",
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestsFromMapFunc",
    "EventHandler",
    "GenerationChangedPredicate",
    "KubernetesLeaseLock",
    "LeaderElector",
    "LeaseLock",
    "Manager",
    "MetricsObserver",
    "Predicate",
    "Reconciler",
    "Request",
    "ResourceVersionChangedPredicate",
    "Runnable",
    "Result",
    "TerminalError",
]
