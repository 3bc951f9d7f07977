"""The reconcile loop, after controller-runtime: write a ``Reconciler``; a ``Controller`` feeds it
``Request``s from watched informers through a rate-limited workqueue and applies the ``Result``;
the ``Client`` (``Manager.get_client()``) reads from the informer cache and writes to the cluster.
"""

from controllers.metrics import MetricsObserver
from controllers.reconcile.client import (
    AlreadyOwnedError,
    Client,
    EventRecorder,
    EventType,
    PatchType,
    Preconditions,
    PropagationPolicy,
    StatusWriter,
    add_finalizer,
    contains_finalizer,
    ignore_not_found,
    not_found_ignored,
    remove_finalizer,
    set_controller_reference,
    set_owner_reference,
)
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
    "AlreadyOwnedError",
    "Client",
    "Controller",
    "ControllerMetrics",
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestsFromMapFunc",
    "EventHandler",
    "EventRecorder",
    "EventType",
    "GenerationChangedPredicate",
    "KubernetesLeaseLock",
    "LeaderElector",
    "LeaseLock",
    "Manager",
    "MetricsObserver",
    "PatchType",
    "Preconditions",
    "Predicate",
    "PropagationPolicy",
    "Reconciler",
    "Request",
    "ResourceVersionChangedPredicate",
    "Runnable",
    "Result",
    "StatusWriter",
    "TerminalError",
    "add_finalizer",
    "contains_finalizer",
    "ignore_not_found",
    "not_found_ignored",
    "remove_finalizer",
    "set_controller_reference",
    "set_owner_reference",
]
