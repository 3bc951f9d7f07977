"""The fault proxy: the simulator's faults on any cluster, by standing between it and its clients.

``python manage.py faultproxy --upstream-kubeconfig F --kubeconfig OUT`` (``ctrlscope faultproxy``)
starts a reverse proxy on loopback that clients use like an API server (through ``OUT``) and that
forwards everything to the upstream cluster with ``F``'s credentials. In between it injects what the
simulator injects -- error rates by verb and resource, latency, a network stall, ending or dropping
every watch, 410 on watches resumed from before a compaction point, killing pods -- with the same fault
model (``controllers.faults``) and the same ``/_sim/`` API, so ``SimFaults``, the scenarios and the
dashboard's Faults panel work through it unchanged; and it counts requests by client
(``GET /_sim/requests``).

* ``server`` -- ``FaultProxy``: authentication of its clients, the order faults apply in, forwarding,
  its lifecycle and kubeconfig;
* ``upstream`` -- ``Upstream``: the real API server and its credentials, as the ``kubernetes``
  client's loader gives them (TLS, tokens, client certificates, exec plugins); the loopback check;
* ``request_info`` -- a request's verb and resource, as the API server reads them off the path;
* ``watches`` -- ``ForwardedWatch`` (a watch copied whole events at a time, to end, drop or stall)
  and ``Compaction`` (the 410);
* ``backend`` -- ``ProxyFaultBackend``: the faults only a cluster can do, as far as a proxy can.

It imports neither the simulator nor Django (``.importlinter``).
"""
