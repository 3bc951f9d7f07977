"""An embedded simulated Kubernetes API server that real kubectl and the ``kubernetes`` client use.

ctrlscope's default "cluster" when the user has none, and the cluster every test runs against. It
speaks the real protocol (see ``shared/SIM_PROTOCOL.md``): one global resourceVersion, bounded watch
history with 410s, bookmarks, pagination, selectors, all patch types including strategic merge and
server-side apply, Table output, aggregated discovery and OpenAPI v3 stubs — plus a small control
plane (deployments → replica sets → pods, a kubelet) and fault injection under ``/_sim/``.

Module map, in the order a request meets them: ``server`` (SimCluster: wiring and lifecycle) →
``api`` (routing and verbs) → ``codec`` (JSON, YAML and, through ``protobuf`` and its message table
``protobuf_schema.json`` generated from the Go types, the protobuf bodies Go clients send) /
``validation`` / ``patch``
/ ``strategic`` / ``apply`` → ``store`` (RVs, history, write semantics; ``gojson`` stores a built-in
kind as its Go type encodes it) → ``watch`` (events and watchers); ``resources``, ``schema``,
``defaults``, ``managedfields`` (with ``smd_schema.json``, generated), ``selectors``, ``tables``,
``discovery`` describe the API; ``reviews`` answers ``kubectl auth can-i`` / ``whoami``; ``gc``,
``controlplane``, ``kubelet`` (with ``nodes``) and ``events`` simulate kube-controller-manager, the
scheduler and nodes (``background`` is their shared task lifecycle); ``faults`` breaks things on
purpose; ``gctuning`` keeps CPython's garbage collector from pausing a dedicated simulator process.

The simulator never imports ctrlscope's controller runtime (and vice versa): it must behave like an
independent cluster for the runtime to be tested against it honestly.
"""

from controllers.sim.server import SimCluster, run_server

__all__ = ["SimCluster", "run_server"]
