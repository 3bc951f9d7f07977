"""kopf in-process overhead: one kopf operator, plain (``kopf run``) vs under ``manage.py runkopf``, in one run.

The operator (``bench/kopf_operator.py``) has one ``@kopf.on.create`` handler that logs a line and
writes the status: per object kopf makes its usual calls (a PATCH for the handler's progress and
result, a PATCH purging the progress) and the handler runs once. The simulator runs in its own
process (``manage.py simcluster``); the driver creates ``-n`` PodSets in a fresh namespace from 8
threads and polls until every one has ``status.handled``. Each round starts a fresh operator; the
modes run interleaved, ``--rounds`` times each. The table gives the median and range of objects
handled per second, and the CPU the operator process used per object (user + system: steadier than
the wall clock on a busy machine). The in-process mode publishes to the real Redis (``--redis``)
under a throwaway prefix, deleted afterwards.

Run: ``python bench/kopf.py [--rounds 3] [-n 300]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controllers.examples.podset import API_VERSION, ensure_crd, podset  # noqa: E402
from controllers.informers.http_client import KubernetesClient  # noqa: E402
from controllers.process import stop_process  # noqa: E402

OPERATOR = Path(__file__).with_name("kopf_operator.py")
MODES = ("plain kopf", "runkopf (in-process)")


def start_simulator(tmp: Path) -> tuple[subprocess.Popen, Path]:
    kubeconfig = tmp / "kubeconfig.yaml"
    log = open(tmp / "sim.log", "wb")  # noqa: SIM115 -- lives as long as the process
    proc = subprocess.Popen([sys.executable, "manage.py", "simcluster", "--port", "0", "--kubeconfig", str(kubeconfig)],
                            cwd=ROOT, env={**os.environ, "CTRLSCOPE_DEMO": "1", "CTRLSCOPE_RUN_DIR": str(tmp)},
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not kubeconfig.exists() or "listening" not in (tmp / "sim.log").read_text():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit(f"the simulator did not start:\n{(tmp / 'sim.log').read_text()[-2000:]}")
        time.sleep(0.1)
    return proc, kubeconfig


def one_round(mode: str, n: int, kubeconfig: Path, redis_url: str, tmp: Path) -> dict[str, float]:
    client = KubernetesClient.from_kubeconfig(str(kubeconfig))
    ns = f"bench-{uuid.uuid4().hex[:6]}"
    client.send_json("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    prefix = f"ctrlscope-bench-kopf-{uuid.uuid4().hex[:8]}:"
    kopf_args = ["--standalone", "-n", ns, str(OPERATOR)]
    env = {**os.environ, "CTRLSCOPE_DEMO": "1", "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix,
           "CTRLSCOPE_RUN_DIR": str(tmp), "KUBECONFIG": str(kubeconfig)}
    if mode == MODES[0]:
        argv, ready = [sys.executable, "-m", "kopf", "run", "--quiet", *kopf_args], None
    else:
        argv = [sys.executable, "manage.py", "runkopf", "--worker-name", "bench", "--kubeconfig", str(kubeconfig),
                "--", "--quiet", *kopf_args]
    log_path = tmp / f"operator-{uuid.uuid4().hex[:6]}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    ready = proc_ready(client, ns, proc, log_path)
    ps = psutil.Process(proc.pid)
    cpu0 = ps.cpu_times()
    start = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: client.send_json("POST", f"/apis/{API_VERSION}/namespaces/{ns}/podsets",
                                                 podset(f"b{i}", "kopf-bench", 1, namespace=ns)), range(n)))
    while True:
        items = client.get_json(f"/apis/{API_VERSION}/namespaces/{ns}/podsets")["items"]
        if sum(1 for o in items if (o.get("status") or {}).get("handled")) >= n:
            break
        if proc.poll() is not None or time.monotonic() - start > 600:
            raise SystemExit(f"{mode}: the operator stopped or stalled:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.05)
    elapsed = time.monotonic() - start
    cpu1 = ps.cpu_times()
    stop_process(proc)
    published = 0
    r = redis.Redis.from_url(redis_url)
    try:
        for key in r.scan_iter(match=prefix + "*"):
            if b":stream:" in key:
                published += r.xlen(key)
            r.delete(key)
    finally:
        r.close()
    del ready
    return {"rate": n / elapsed, "cpu_ms": ((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)) * 1000 / n,
            "frames": published}


def proc_ready(client: KubernetesClient, ns: str, proc: subprocess.Popen, log_path: Path) -> bool:
    """Wait until the operator handles a probe object: logged in, watching, handling."""
    client.send_json("POST", f"/apis/{API_VERSION}/namespaces/{ns}/podsets", podset("probe", "kopf-bench", 1, namespace=ns))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        obj = client.get_json(f"/apis/{API_VERSION}/namespaces/{ns}/podsets/probe")
        if (obj.get("status") or {}).get("handled"):
            client.send_json("DELETE", f"/apis/{API_VERSION}/namespaces/{ns}/podsets/probe")
            return True
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise SystemExit(f"the operator did not start:\n{log_path.read_text()[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-n", type=int, default=300, help="PodSets per round (300)")
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()
    redis.Redis.from_url(args.redis).ping()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sim, kubeconfig = start_simulator(tmp)
        try:
            ensure_crd(KubernetesClient.from_kubeconfig(str(kubeconfig)))
            results: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
            for r in range(args.rounds):
                for mode in MODES:
                    res = one_round(mode, args.n, kubeconfig, args.redis, tmp)
                    results[mode].append(res)
                    print(f"round {r + 1}/{args.rounds} {mode}: {res['rate']:.0f} objects/s, "
                          f"{res['cpu_ms']:.2f} ms CPU/object", file=sys.stderr)
        finally:
            stop_process(sim)
    plain_rate = statistics.median(x["rate"] for x in results[MODES[0]])
    plain_cpu = statistics.median(x["cpu_ms"] for x in results[MODES[0]])
    print(f"\nkopf operator, {args.n} PodSets per round, one create handler; medians of {args.rounds} interleaved rounds\n")
    print("| contender | objects handled/s (range) | operator CPU per object | vs plain kopf | stream entries published |")
    print("|---|---:|---:|---:|---:|")
    for mode in MODES:
        rates = [x["rate"] for x in results[mode]]
        cpu = statistics.median(x["cpu_ms"] for x in results[mode])
        frames = int(statistics.median(x["frames"] for x in results[mode]))
        print(f"| {mode} | {statistics.median(rates):.0f} ({min(rates):.0f}–{max(rates):.0f}) | {cpu:.2f} ms | "
              f"{(statistics.median(rates) / plain_rate - 1) * 100:+.1f} % rate, {(cpu / plain_cpu - 1) * 100:+.1f} % CPU | "
              f"{frames:,} |")


if __name__ == "__main__":
    main()
