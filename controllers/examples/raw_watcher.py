"""A raw watch loop over Deployments, written as people write it -- the other half of the second
source document's question, "when writing an operator, a Watcher or an Informer?".

The document answers with an informer (client-go's ``SharedInformerFactory``, a Deployment informer,
Add/Update/Delete handlers) and three claims: an informer caches, so it lightens the API server; it
survives network failures; its cache keeps data while the connection is down. This module is what
it argues against: the loop people write before they meet informers, with the official client's
``watch.Watch().stream(apps.list_namespaced_deployment, ...)``. The scenario ``watcher-vs-informer``
runs it beside an informer on the same Deployments and measures each claim.

**Per event** the loop GETs the Deployment the event names (``read_namespaced_deployment``): it has
no cache, and code that acts on an object reads it as it is now, not as the event carried it. Each
GET is a request the API server serves; an informer's handler reads its cache instead.

**When the stream ends** -- and it always does: the API server closes every watch after its timeout
(``timeout_seconds``, which the official examples pass, or the server's own 30-60 min), a
connection breaks, a load balancer drops it -- the three variants do what people do. Each is a
function here (``VARIANTS``), not a flag:

- ``stops_on_end``: ``for event in w.stream(...)`` and nothing after it. When the server closes the
  watch the ``for`` loop simply finishes; the program keeps running and watches nothing. Nothing
  fails, nothing is logged: the most common bug.
- ``restart_from_empty``: the same loop inside ``while True``, watching again from resourceVersion
  ``""``. Each new watch starts with every existing object as ADDED (the handler sees each again and
  cannot tell it from a new one), and a Deployment deleted while no watch was open is never seen.
- ``restart_from_last``: keeps the last resourceVersion it saw and watches again from it, so nothing
  is missed across a dropped connection -- until the server no longer has that version (history
  compacted) and answers 410 Gone. It does not handle 410: like any other error it waits a second
  and tries the same resourceVersion again, forever, and every try is a request answered 410.

None of them relists. That is what client-go's Reflector adds: LIST, then WATCH from the list's
resourceVersion, and LIST again on 410, into a cache the handlers read from.

The lines marked ``ctrlscope:`` report the loop to the dashboard (``ProtocolPublisher.watcher``,
protocol v1.6): each watch it opens, each event, how each stream ended, each GET, and whether it
still watches at all -- the dashboard shows a loop that stopped, which its program never notices.

Run one (``REDIS_URL``/``CTRLSCOPE_PREFIX`` say where the dashboard reads)::

    python -m controllers.examples.raw_watcher --variant stops-on-end --kubeconfig run/kubeconfig-sim.yaml
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from controllers.publish import ProtocolPublisher, WatcherReport
from controllers.schema import WatchEndReason, WatcherVariant

log = logging.getLogger("ctrlscope.examples.raw_watcher")

RESOURCE = "apps/v1/deployments"
GONE = 410
TIMEOUT_SECONDS = 300
"""The ``timeout_seconds`` each watch asks for: the server closes the stream after it (the official
client's examples pass one; without it the server picks 30-60 minutes)."""
RETRY_DELAY = 1.0
"""How long the restarting variants wait after an error before they watch again (seconds)."""

Loop = Callable[..., None]


def handle(apps: client.AppsV1Api, event: dict[str, Any], report: WatcherReport) -> None:
    """What the program does with one event: print it, reading the Deployment as it is now -- a GET,
    since there is no cache to read it from. A deleted one cannot be read: it is only printed."""
    meta = event["raw_object"]["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    if event["type"] == "DELETED":
        print(f"deleted: {namespace}/{name}")
        return
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
    try:
        with report.reading(f"{namespace}/{name}", path):  # ctrlscope: the GET, timed, with its status
            current = apps.read_namespaced_deployment(name, namespace)
    except (ApiException, urllib3.exceptions.HTTPError) as exc:
        print(f"{event['type'].lower()}: {namespace}/{name} (could not read it: {exc})")
        return
    print(f"{event['type'].lower()}: {namespace}/{name}, {current.spec.replicas} replicas")


def stops_on_end(apps: client.AppsV1Api, namespace: str, report: WatcherReport, *,
                 stop: threading.Event, timeout_seconds: int = TIMEOUT_SECONDS,
                 retry_delay: float = RETRY_DELAY) -> None:
    """Watch once; return when the server ends the stream (see the module docstring)."""
    w = watch.Watch()
    report.watch_started("")  # ctrlscope
    try:
        for event in w.stream(apps.list_namespaced_deployment, namespace, timeout_seconds=timeout_seconds):
            report.event(event["type"], event["raw_object"])  # ctrlscope
            handle(apps, event, report)
    except Exception as exc:  # ctrlscope: how the stream ended, then the loop ends as it would
        report.watch_ended(_end_reason(exc), error=str(exc))
        raise
    report.watch_ended(WatchEndReason.CLOSED)  # ctrlscope
    # The for loop is over: nothing watches any more, and nothing says so.


def restart_from_empty(apps: client.AppsV1Api, namespace: str, report: WatcherReport, *,
                       stop: threading.Event, timeout_seconds: int = TIMEOUT_SECONDS,
                       retry_delay: float = RETRY_DELAY) -> None:
    """Watch again from resourceVersion "" whenever the stream ends (see the module docstring)."""
    w = watch.Watch()
    while not stop.is_set():
        report.watch_started("")  # ctrlscope
        try:
            for event in w.stream(apps.list_namespaced_deployment, namespace, timeout_seconds=timeout_seconds):
                report.event(event["type"], event["raw_object"])  # ctrlscope
                handle(apps, event, report)
        except Exception as exc:  # the connection broke, or the server refused: try again soon
            report.watch_ended(_end_reason(exc), error=str(exc))  # ctrlscope
            log.warning("watch failed: %s; watching again in %.0f s", exc, retry_delay)
            stop.wait(retry_delay)
            continue
        report.watch_ended(WatchEndReason.CLOSED)  # ctrlscope


def restart_from_last(apps: client.AppsV1Api, namespace: str, report: WatcherReport, *,
                      stop: threading.Event, timeout_seconds: int = TIMEOUT_SECONDS,
                      retry_delay: float = RETRY_DELAY) -> None:
    """Watch again from the last resourceVersion seen; no 410 handling (see the module docstring)."""
    w = watch.Watch()
    resource_version = ""
    while not stop.is_set():
        report.watch_started(resource_version)  # ctrlscope
        try:
            for event in w.stream(apps.list_namespaced_deployment, namespace, resource_version=resource_version,
                                  timeout_seconds=timeout_seconds):
                report.event(event["type"], event["raw_object"])  # ctrlscope
                resource_version = event["raw_object"]["metadata"]["resourceVersion"]
                handle(apps, event, report)
        except Exception as exc:  # a 410 included: it is one more error to wait out
            report.watch_ended(_end_reason(exc), error=str(exc))  # ctrlscope
            log.warning("watch failed: %s; watching again from %s in %.0f s", exc, resource_version, retry_delay)
            stop.wait(retry_delay)
            continue
        report.watch_ended(WatchEndReason.CLOSED)  # ctrlscope


VARIANTS: dict[WatcherVariant, Loop] = {
    WatcherVariant.STOPS_ON_END: stops_on_end,
    WatcherVariant.RESTART_FROM_EMPTY: restart_from_empty,
    WatcherVariant.RESTART_FROM_LAST: restart_from_last,
}


def _end_reason(exc: BaseException) -> WatchEndReason:
    """ctrlscope: the protocol's name for how a stream ended with ``exc``."""
    return WatchEndReason.EXPIRED if isinstance(exc, ApiException) and exc.status == GONE else WatchEndReason.ERROR


def run_loop(variant: str, apps: client.AppsV1Api, namespace: str, report: WatcherReport, *,
             stop: threading.Event, timeout_seconds: int = TIMEOUT_SECONDS, retry_delay: float = RETRY_DELAY) -> None:
    """Run ``variant``'s loop on this thread until it returns (or raises), saying so to the dashboard."""
    loop = VARIANTS[WatcherVariant(variant)]
    report.watching()  # ctrlscope
    try:
        loop(apps, namespace, report, stop=stop, timeout_seconds=timeout_seconds, retry_delay=retry_delay)
    except Exception:
        log.exception("the %s watch loop died", variant)
    finally:
        report.stopped()  # ctrlscope: the loop is over, whatever the process does next


def read_deployment(apps: client.AppsV1Api, namespace: str, name: str, *, timeout: float) -> Any:
    """How this program gets a Deployment it needs outside an event: from the API server, as
    ``handle`` does (there is nothing else to read it from). Raises when no answer comes in time."""
    return apps.read_namespaced_deployment(name, namespace, _request_timeout=timeout)


def apps_api(kubeconfig: str | None, *, user_agent: str, context: str | None = None) -> client.AppsV1Api:
    """An AppsV1Api for ``kubeconfig`` whose requests say ``user_agent`` (the API server's request
    counts tell this loop's requests from everyone else's by it)."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
    api_client = client.ApiClient(configuration)
    api_client.user_agent = user_agent
    return client.AppsV1Api(api_client)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A raw watch loop over Deployments (no informer), shown on ctrlscope.")
    parser.add_argument("--variant", required=True, choices=[v.value for v in WatcherVariant])
    parser.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG or ~/.kube/config")
    parser.add_argument("--context", default=None)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--worker-name", default=None, help="the worker's name on the dashboard (default: raw-watcher-VARIANT)")
    parser.add_argument("--timeout-seconds", type=int, default=TIMEOUT_SECONDS, help="each watch's timeout_seconds")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    apps = apps_api(args.kubeconfig, user_agent=f"raw-watcher/{args.variant}", context=args.context)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    worker = args.worker_name or f"raw-watcher-{args.variant}"
    url, prefix = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), os.environ.get("CTRLSCOPE_PREFIX", "ctrlscope:")
    with ProtocolPublisher(url, worker=worker, prefix=prefix) as publisher:  # ctrlscope
        report = publisher.watcher("deployments", resource=RESOURCE, namespace=args.namespace, variant=args.variant)
        loop = threading.Thread(target=run_loop, args=(args.variant, apps, args.namespace, report),
                                kwargs={"stop": stop, "timeout_seconds": args.timeout_seconds}, daemon=True)
        loop.start()
        # The program goes on with whatever else it does; whether its loop still watches, it cannot tell.
        try:
            stop.wait()
        except KeyboardInterrupt:
            stop.set()


if __name__ == "__main__":
    main()
