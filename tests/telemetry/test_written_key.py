"""``written_key``: which object a write's request names, the half of self-triggering that the
runtime's path gives (the other half is the resourceVersion its answer carried)."""

from __future__ import annotations

import pytest

from controllers.telemetry.provenance import written_key


@pytest.mark.parametrize(("path", "key"), [
    ("/api/v1/namespaces/ns/pods/web", "ns/web"),
    ("/api/v1/namespaces/ns/pods/web/status", "ns/web"),  # a subresource names its object
    ("/apis/apps/v1/namespaces/d/deployments/web?fieldManager=x", "d/web"),  # the query is not the path
    ("/apis/demo.ctrlscope.dev/v1/podsets/cluster-wide", "cluster-wide"),  # cluster-scoped
    ("/api/v1/namespaces/ns", "ns"),  # the Namespace object itself
    ("/api/v1/namespaces/ns/pods", None),  # a create: only the answer names the object
    ("/apis/apps/v1/deployments", None),
    ("https://10.0.0.1:6443/api/v1/namespaces/ns/configmaps/c%2Dd", "ns/c-d"),  # a URL, escapes undone
    ("/healthz", None),
    ("", None),
])
def test_the_key_a_write_names(path: str, key: str | None) -> None:
    assert written_key(path) == key
