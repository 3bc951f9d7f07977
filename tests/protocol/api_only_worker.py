"""A process with none of ctrlscope's runtime: it publishes through controllers.publish alone.

Run by tests/protocol/test_publish_api_browser.py: ``python -m tests.protocol.api_only_worker URL PREFIX``.
It plays a small operator: a Pod informer lists three pods and syncs; a controller reconciles each
pod's key; ``default/flaky`` fails twice (rate-limited retries with 1 s and 2 s backoff), then
succeeds. It prints ``ready`` once the informer and the queue are published, and reconciles only when
a line arrives on stdin: the test sends it once the controller page is live, so the 3 s of backoff
cannot be over before the page looks (on a loaded machine getting there took longer). Then it keeps
its metrics ticking until stdin closes (the test is done), at most 60 s.
"""

from __future__ import annotations

import sys
import threading

from controllers.publish import ProtocolPublisher


def pod(name: str, rv: str) -> dict:
    return {"metadata": {"namespace": "default", "name": name, "resourceVersion": rv, "uid": f"uid-{name}"},
            "status": {"phase": "Running"}}


def main(url: str, prefix: str) -> None:
    go, done = threading.Event(), threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), go.set(), sys.stdin.read(), done.set()), daemon=True).start()
    with ProtocolPublisher(url, worker="kopf-demo", runtime="kopf", prefix=prefix) as pub:
        pods = pub.informer("v1/Pod")
        pods.listed([pod("web", "10"), pod("db", "11"), pod("flaky", "12")], resource_version="12", duration=0.02)
        pods.synced()
        pods.watch_started("12")
        queue = pub.queue("podsets")
        ctl = pub.controller("podsets", watches=["v1/Pod"])
        for name in ("web", "db", "flaky"):
            ctl.event("create", f"default/{name}")
            queue.add(f"default/{name}")
        failures = 0
        pending = ["default/web", "default/db", "default/flaky"]
        print("ready", flush=True)
        go.wait(60)
        while pending and not done.is_set():
            for key in list(pending):
                queue.get(key)
                try:
                    with ctl.reconcile(key):
                        if key == "default/flaky" and failures < 2:
                            failures += 1
                            raise RuntimeError(f"pod not ready (attempt {failures})")
                    queue.forget(key)
                    queue.done(key)
                    pending.remove(key)
                except RuntimeError:
                    queue.add_rate_limited(key, delay=float(failures), requeues=failures)
                    queue.done(key)
                    done.wait(failures)
                    queue.add(key)
        print("converged", flush=True)
        done.wait(60)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
