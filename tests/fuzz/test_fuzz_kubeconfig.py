"""Fuzz kubeconfig files as a worker loads them (``KubernetesClient.from_kubeconfig``, which
``runcontrollers``, ``runkopf`` and ``scenario`` call): any file either gives a client for its
server or a ``KubeconfigError`` whose message names the problem -- never the loader's
AttributeError or TypeError on an odd value, never a traceback.

Files are kubeconfig-shaped YAML whose every value may be of the wrong type (numbers for names,
lists for servers, strings for lists), plus raw text (broken YAML, binary, tabs).
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from controllers.informers.http_client import KubernetesClient
from controllers.informers.kubeconfig import KubeconfigError
from tests.fuzz.budget import assert_clear, budget, record

TARGET = "kubeconfig"
_DIR = Path(tempfile.mkdtemp(prefix="ctrlscope-fuzz-kubeconfig-"))
_N = itertools.count()

ODD = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(max_size=5) | st.lists(st.integers(0, 2), max_size=2) | st.dictionaries(st.text(max_size=3),
                                                                                       st.integers(), max_size=2)


def maybe(value: st.SearchStrategy) -> st.SearchStrategy:
    """``value`` nine times in ten, else a value of any other type (``|`` would flatten ODD's
    branches and pick ``value`` one time in eight)."""
    return st.integers(0, 9).flatmap(lambda i: ODD if i == 0 else value)


NAME = maybe(st.sampled_from(["c", "k", "u", ""]))
SERVER = maybe(st.sampled_from(["http://127.0.0.1:6443", "https://x.example:443", "127.0.0.1", "", "http://[::1"]))
B64 = maybe(st.sampled_from(["", "!!", "aGVsbG8=", "LS0tLS1CRUdJTg=="]))


CLUSTER = st.fixed_dictionaries({"name": NAME}, optional={"cluster": maybe(st.fixed_dictionaries(
    {"server": SERVER}, optional={"insecure-skip-tls-verify": maybe(st.booleans()),
                                  "certificate-authority-data": B64, "tls-server-name": NAME,
                                  "proxy-url": SERVER, "certificate-authority": maybe(st.just("/nonexistent"))}))})
USER = st.fixed_dictionaries({"name": NAME}, optional={"user": maybe(st.fixed_dictionaries({}, optional={
    "token": maybe(st.just("t0k3n")), "username": NAME, "password": NAME, "client-certificate-data": B64,
    "client-key-data": B64, "tokenFile": maybe(st.just("/nonexistent")),
    "exec": maybe(st.fixed_dictionaries({"command": NAME}, optional={"apiVersion": NAME, "args": ODD})),
    "auth-provider": maybe(st.fixed_dictionaries({"name": NAME}, optional={"config": ODD}))}))})
CONTEXT = st.fixed_dictionaries({"name": NAME}, optional={"context": maybe(st.fixed_dictionaries(
    {"cluster": NAME, "user": NAME}, optional={"namespace": NAME}))})
KUBECONFIG = st.fixed_dictionaries({}, optional={
    "apiVersion": maybe(st.just("v1")), "kind": maybe(st.just("Config")), "current-context": NAME,
    "clusters": maybe(st.lists(CLUSTER, max_size=2)), "users": maybe(st.lists(USER, max_size=2)),
    "contexts": maybe(st.lists(CONTEXT, max_size=2)), "preferences": ODD})


def coherent(cluster: dict, user: dict, namespace: object) -> dict:
    """A kubeconfig whose names all resolve (so the loader goes past them), with the generated bodies."""
    return {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": cluster}], "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": namespace}}]}


COHERENT = st.builds(coherent, CLUSTER.map(lambda c: c.get("cluster", {})), USER.map(lambda u: u.get("user", {})),
                     NAME)
TEXT = st.one_of(
    COHERENT.map(lambda d: yaml.safe_dump(d, default_flow_style=False)),
    COHERENT.map(lambda d: yaml.safe_dump(d, default_flow_style=False)),
    KUBECONFIG.map(lambda d: yaml.safe_dump(d, default_flow_style=False)),
    ODD.map(yaml.safe_dump),
    st.sampled_from(["a: [", "\tclusters: []", "{", "--- !!python/object:os.system x", "clusters: *x",
                     "a: &x [*x]", "current-context: c\n---\nb: 1", "\x00\xff"]),
    st.text(max_size=30))


def load(text: str | bytes) -> KubernetesClient:
    path = _DIR / f"kubeconfig-{next(_N)}.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    try:
        return KubernetesClient.from_kubeconfig(str(path))
    finally:
        path.unlink()


@budget(150)
@given(text=TEXT)
@example(text="[]")  # TypeError: list indices must be integers or slices, not str
@example(text="clusters: 5\n")  # TypeError: 'int' object is not iterable
@example(text="current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
              "clusters: [{name: k, cluster: {server: 5}}]\nusers: [{name: u, user: {}}]\n")  # no attribute 'rstrip'
@example(text="current-context: c\ncontexts: [{name: c, context: 5}]\nclusters: []\nusers: []\n")  # 'safe_get'
@example(text="current-context: [1]\ncontexts: []\n")  # "Expected object with name <ConfigNode object at 0x...>"
@example(text="a: [")  # a three-line YAML parser message
def test_any_kubeconfig_loads_or_says_what_is_wrong(text: str) -> None:
    try:
        client = load(text)
    except KubeconfigError as exc:
        assert_clear(str(exc), context=text)
        record(TARGET, str(exc).replace(str(_DIR), "DIR"))
        return
    record(TARGET, None)
    assert isinstance(client.server, str)
