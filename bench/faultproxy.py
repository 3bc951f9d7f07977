"""What the fault proxy costs a client when it injects nothing: the same requests, straight to a real
kube-apiserver and through ``manage.py faultproxy``'s ``FaultProxy`` in front of it.

Measured with ctrlscope's own client (``KubernetesClient``, one connection pool per side):
  * GET of one ConfigMap, sequential: p50 / p99 ms;
  * LIST of the namespace's ConfigMaps (``--objects`` of 1 KiB each): median ms of 10;
  * watch delivery: ``--objects`` creates, one after another, while a watch is open: p50 / p99 ms
    from sending a create to reading its ADDED event (the creates go straight to the API server on
    both sides, so only the watch's path differs).

Peer, in the same run: the same client straight to the same API server (the first column).

Run: .venv/bin/python bench/faultproxy.py [--objects N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.realpeer import real_cluster  # noqa: E402
from controllers.faultproxy.server import FaultProxy  # noqa: E402
from controllers.faultproxy.upstream import Upstream  # noqa: E402
from controllers.informers.http_client import KubernetesClient  # noqa: E402


def gets(client: KubernetesClient, path: str, n: int) -> tuple[float, float]:
    took = []
    for _ in range(n):
        start = time.perf_counter()
        client.get_json(path)
        took.append((time.perf_counter() - start) * 1000)
    took.sort()
    return took[len(took) // 2], took[int(len(took) * 0.99) - 1]


def lists(client: KubernetesClient, path: str) -> float:
    took = []
    for _ in range(10):
        start = time.perf_counter()
        client.get_json(path)
        took.append((time.perf_counter() - start) * 1000)
    return statistics.median(took)


def watch_delivery(reader: KubernetesClient, writer: KubernetesClient, ns: str, n: int) -> tuple[float, float]:
    """p50 / p99 ms from sending a create to reading its ADDED event on a watch."""
    path = f"/api/v1/namespaces/{ns}/configmaps"
    rv = reader.get_json(path)["metadata"]["resourceVersion"]
    stream = reader.list_watch("v1", "ConfigMap", ns).watch(resource_version=rv, timeout_seconds=300)
    sent: dict[str, float] = {}
    received: dict[str, float] = {}
    done = threading.Event()

    def read() -> None:
        for event in stream:
            if event.type == "ADDED":
                received[event.obj["metadata"]["name"]] = time.perf_counter()
                if len(received) == n:
                    done.set()
                    return

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    time.sleep(0.5)  # the watch is open upstream
    tag = uuid.uuid4().hex[:6]
    for i in range(n):
        name = f"w-{tag}-{i}"
        sent[name] = time.perf_counter()
        writer.send_json("POST", path, {"metadata": {"name": name}, "data": {"k": "v" * 64}})
    assert done.wait(120), f"only {len(received)} of {n} events arrived"
    stream.close()
    took = sorted((received[name] - at) * 1000 for name, at in sent.items())
    return took[len(took) // 2], took[int(len(took) * 0.99) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=500)
    opts = parser.parse_args()
    run = ROOT / "run" / "bench-faultproxy"
    with real_cluster(run) as (cluster, _):
        ns_list, ns_watch_direct, ns_watch_proxy = "fp-list", "fp-watch-direct", "fp-watch-proxy"
        direct = KubernetesClient.from_kubeconfig(str(cluster.kubeconfig))
        for ns in (ns_list, ns_watch_direct, ns_watch_proxy):  # ConfigMaps need no ServiceAccount
            direct.send_json("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        for i in range(opts.objects):
            direct.send_json("POST", f"/api/v1/namespaces/{ns_list}/configmaps",
                             {"metadata": {"name": f"cm-{i}"}, "data": {"k": "v" * 1024}})
        with FaultProxy(Upstream.from_kubeconfig(str(cluster.kubeconfig))) as proxy:
            kubeconfig = proxy.write_kubeconfig(run / "proxy.yaml")
            proxied = KubernetesClient.from_kubeconfig(str(kubeconfig))
            one = f"/api/v1/namespaces/{ns_list}/configmaps/cm-0"
            many = f"/api/v1/namespaces/{ns_list}/configmaps"
            for client in (direct, proxied):  # warm both pools
                gets(client, one, 20)
            rows = [
                ("GET one ConfigMap p50 / p99 (ms)", *(f"{p50:.2f} / {p99:.2f}" for p50, p99 in
                                                       (gets(direct, one, 500), gets(proxied, one, 500)))),
                (f"LIST {opts.objects} ConfigMaps, median of 10 (ms)", f"{lists(direct, many):.1f}",
                 f"{lists(proxied, many):.1f}"),
                (f"watch delivery, {opts.objects} creates, p50 / p99 (ms)",
                 *(f"{p50:.2f} / {p99:.2f}" for p50, p99 in (watch_delivery(direct, direct, ns_watch_direct, opts.objects),
                                                            watch_delivery(proxied, direct, ns_watch_proxy,
                                                                           opts.objects)))),
            ]
    width = max(len(r[0]) for r in rows)
    print(f"{'':{width}}  {'direct':>16}  {'through the proxy':>18}")
    for name, a, b in rows:
        print(f"{name:{width}}  {a:>16}  {b:>18}")


if __name__ == "__main__":
    main()
