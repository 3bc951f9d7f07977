"""Informers, after client-go ``tools/cache``: a ``Reflector`` lists and watches into a
``DeltaFIFO``; a ``SharedInformer`` pops it into an indexed ``Store`` and fans changes out to event
handlers; a ``SharedInformerFactory`` shares one informer per resource.

``DeltaType`` (a ``Delta``'s type) and ``WatchEventType`` (a ``WatchEvent``'s) are the protocol's
enums, re-exported so that handler and test code need not know where the vocabulary lives.
"""

from controllers.informers.backoff import Backoff
from controllers.informers.delta_fifo import FIFO_MODEL, Delta, DeltaFIFO
from controllers.informers.factory import ListWatchClient, SharedInformerFactory, TweakListOptionsFunc
from controllers.informers.keys import DeletedFinalStateUnknown, object_key, split_key
from controllers.informers.lazy_object import LazyObject, decoded
from controllers.informers.listwatch import ApiError, ListOptions, ListResult, ListWatch, WatchEvent
from controllers.informers.reflector import Reflector
from controllers.informers.shared_informer import HandlerRegistration, SharedInformer
from controllers.informers.store import CacheMode, Indexer, Store
from controllers.informers.transform import TransformFunc, transform_strip_managed_fields
from controllers.schema import DeltaType, WatchEventType

__all__ = [
    "FIFO_MODEL",
    "ApiError",
    "Backoff",
    "CacheMode",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaFIFO",
    "DeltaType",
    "HandlerRegistration",
    "Indexer",
    "LazyObject",
    "ListOptions",
    "ListResult",
    "ListWatch",
    "ListWatchClient",
    "Reflector",
    "SharedInformer",
    "SharedInformerFactory",
    "Store",
    "TransformFunc",
    "TweakListOptionsFunc",
    "WatchEvent",
    "WatchEventType",
    "decoded",
    "object_key",
    "split_key",
    "transform_strip_managed_fields",
]
