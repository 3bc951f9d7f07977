"""Loopback TCP ports for the servers ctrlscope starts as child processes: a private redis-server,
the nodes of a Redis Cluster, the real control plane's etcd and API server, the demo's dashboard.

``free_port()`` binds port 0 on 127.0.0.1, reads the port the kernel chose and closes the socket, so
the child can bind it a moment later. Nothing holds the port in between: another process may take
it, and a caller that needs a particular port (a node's cluster bus at port + 10,000, a port the user
asked for) asks ``port_is_free`` first, which tries to bind it the same way.

One definition for every launcher (controllers.telemetry and controllers.realcluster must not
import each other; both may import this), and nothing here but the standard library.
"""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Whether TCP ``port`` on 127.0.0.1 can be bound right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True
