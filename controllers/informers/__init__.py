"""Informers, after client-go ``tools/cache``: a ``Reflector`` lists and watches into a
``DeltaFIFO``; a ``SharedInformer`` pops it into an indexed ``Store`` and fans changes out to event
handlers; a ``SharedInformerFactory`` shares one informer per resource.
"""

from controllers.informers.backoff import Backoff
from controllers.informers.delta_fifo import FIFO_MODEL, Delta, DeltaFIFO
from controllers.informers.factory import ListWatchClient, SharedInformerFactory
from controllers.informers.keys import DeletedFinalStateUnknown, object_key, split_key
from controllers.informers.listwatch import ApiError, ListResult, ListWatch, WatchEvent
from controllers.informers.reflector import Reflector
from controllers.informers.shared_informer import HandlerRegistration, SharedInformer
from controllers.informers.store import Indexer, Store

__all__ = [
    "FIFO_MODEL",
    "ApiError",
    "Backoff",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaFIFO",
    "HandlerRegistration",
    "Indexer",
    "ListResult",
    "ListWatch",
    "ListWatchClient",
    "Reflector",
    "SharedInformer",
    "SharedInformerFactory",
    "Store",
    "WatchEvent",
    "object_key",
    "split_key",
]
