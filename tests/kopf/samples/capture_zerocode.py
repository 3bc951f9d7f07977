"""Capture what a real kopf operator stores on its objects: the samples ``test_zerocode_progress.py``
reads (``zerocode-annotations.json``, ``zerocode-status.json``).

Runs a simulator (``manage.py simcluster``), installs the PodSet CRD, runs a plain kopf operator
(``kopf run --standalone``, no ctrlscope in it) from ``tests/kopf/operators/``, drives a PodSet through
create / scale / delete, and writes every watch event of PodSets as the API server sent it (trimmed to
the fields kopf writes: annotations, finalizers, deletionTimestamp, status), each with the wall time
it arrived (``at``) and the operator's log lines about the object (what really happened). Re-run it
after upgrading kopf::

    .venv/bin/python tests/kopf/samples/capture_zerocode.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from controllers.examples.podset import API_VERSION, ensure_crd, podset  # noqa: E402
from controllers.informers.http_client import KubernetesClient  # noqa: E402

HERE = Path(__file__).parent
OPERATORS = HERE.parent / "operators"
PODSETS = f"/apis/{API_VERSION}/namespaces/default/podsets"

SCENARIOS = {
    "zerocode-annotations.json": ("zerocode_samples.py",
                                  ["create:web", "sleep:5", "scale:web=3", "sleep:4", "delete:web", "sleep:3"]),
    "zerocode-status.json": ("zerocode_status.py", ["create:db", "sleep:4", "delete:db", "sleep:2"]),
}


def trimmed(obj: dict) -> dict:
    meta = obj["metadata"]
    keep = {k: meta[k] for k in ("name", "namespace", "resourceVersion", "annotations", "finalizers",
                                 "deletionTimestamp", "ownerReferences") if k in meta}
    out = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": keep}
    if "status" in obj:
        out["status"] = obj["status"]
    return out


def capture(kubeconfig: Path, operator: str, steps: list[str], log: Path) -> dict:
    client = KubernetesClient.from_kubeconfig(str(kubeconfig))
    ensure_crd(client)
    time.sleep(0.5)
    events: list[dict] = []
    response = client.send("GET", f"/apis/{API_VERSION}/podsets", query=[("watch", "1"), ("timeoutSeconds", "120")],
                           timeout=(5, 150))

    def read() -> None:
        buf = b""
        for chunk in response.stream(4096):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    event = json.loads(line)
                    events.append({"at": time.time(), "type": event["type"], "object": trimmed(event["object"])})

    threading.Thread(target=read, daemon=True).start()
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    with open(log, "wb") as out:
        op = subprocess.Popen([sys.executable, "-m", "kopf", "run", "--standalone", "-n", "default",
                               str(OPERATORS / operator)], env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        time.sleep(3)
        for step in steps:
            verb, _, arg = step.partition(":")
            if verb == "create":
                client.send_json("POST", PODSETS, podset(arg, "kopf", 1))
            elif verb == "scale":
                name, _, replicas = arg.partition("=")
                body = client.get_json(f"{PODSETS}/{name}")
                body["spec"]["replicas"] = int(replicas)
                client.send_json("PUT", f"{PODSETS}/{name}", body)
            elif verb == "delete":
                client.send_json("DELETE", f"{PODSETS}/{arg}")
            elif verb == "sleep":
                time.sleep(float(arg))
    finally:
        op.terminate()
        op.wait(15)
        response.release_conn()
    lines = [line.split("kopf.objects", 1)[1].strip() for line in log.read_text(errors="replace").splitlines()
             if "kopf.objects" in line]
    return {"kopf": metadata.version("kopf"), "operator": f"tests/kopf/operators/{operator}", "steps": steps,
            "operator_log": lines, "events": events}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig.yaml"
        env = {**os.environ, "CTRLSCOPE_DEMO": "1", "CTRLSCOPE_RUN_DIR": tmp}
        sim_log = Path(tmp) / "sim.log"
        with open(sim_log, "wb") as out:
            sim = subprocess.Popen([sys.executable, "manage.py", "simcluster", "--port", "0", "--kubeconfig",
                                    str(kubeconfig), "--start-delay", "0.05", "--no-telemetry"], cwd=ROOT, env=env,
                                   stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while "kubeconfig written" not in sim_log.read_text() and time.monotonic() < deadline:
                time.sleep(0.1)
            for name, (operator, steps) in SCENARIOS.items():
                sample = capture(kubeconfig, operator, steps, Path(tmp) / f"{name}.log")
                (HERE / name).write_text(json.dumps(sample, indent=1) + "\n")
                print(f"{name}: {len(sample['events'])} events, kopf {sample['kopf']}")
        finally:
            sim.terminate()
            sim.wait(15)


if __name__ == "__main__":
    main()
