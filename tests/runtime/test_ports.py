"""controllers/ports.py: the loopback ports every launcher (redisboot, clusterboot, realcluster, the
demo) takes its children's ports from."""

from __future__ import annotations

import socket

from controllers.ports import free_port, port_is_free


def test_a_free_port_can_be_bound_and_a_bound_one_is_not_free():
    port = free_port()
    assert 0 < port < 65536
    assert port_is_free(port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert not port_is_free(port), "a listening socket holds its port"
    assert port_is_free(port), "closed again: free (nothing lingers after a listener that accepted nothing)"
