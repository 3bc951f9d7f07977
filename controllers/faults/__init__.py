"""One fault model for every cluster ctrlscope breaks on purpose: the simulator and the fault proxy.

ctrlscope shows how controllers cope with a cluster that misbehaves, so something must misbehave on
demand. Two things can: the simulated API server (``controllers.sim``), which owns its store, its
watches and its kubelet, and the fault proxy (``controllers.faultproxy``), which stands in front of
any real API server and can only touch the traffic that crosses it. Both speak the same fault API
under ``/_sim/`` (so ``SimFaults``, the scenarios and the dashboard's Faults panel cannot tell them
apart) and keep their rules, their fault log and its records in one implementation:

* ``vocabulary`` -- the names: verbs, fault kinds, capabilities, the actor header;
* ``status`` -- the Kubernetes ``Status`` an injected error or a refused fault request is answered with;
* ``injector`` -- ``FaultInjector``: the active rules (error rates, latency, a network stall), the fault
  log, the ``on_fault`` hook, and every fault as one validated, recorded action over a ``FaultBackend``
  (what only the cluster itself can do: close its watches, compact, pause a kubelet, kill pods, reset);
* ``endpoints`` -- ``FaultEndpoints``: the ``/_sim/`` HTTP API over an injector; a fault the backend
  cannot do is a 501 Status that says why, and ``GET /_sim/faults`` lists those in ``unsupported``;
* ``request_counts`` -- ``RequestCounter``: requests served, by user agent, verb and resource
  (``GET /_sim/requests``), the load a watch loop or an informer puts on the API server.

Nothing here imports the simulator or the runtime (``.importlinter``): both import this.
"""
