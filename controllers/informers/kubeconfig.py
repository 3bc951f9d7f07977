"""Kubeconfig files: the shape checked before the ``kubernetes`` package reads one.

The official loader (``kubernetes.config.load_kube_config``) trusts the file's shape: a ``server``
that is a number, a ``contexts`` entry that is a string or a ``current-context`` that is a list
surface as ``AttributeError: 'int' object has no attribute 'rstrip'`` or ``TypeError: list indices
must be integers``, and a YAML error as a three-line parser message. A worker started with such a
file must say what is wrong with it in one sentence (tests/fuzz/test_fuzz_kubeconfig.py).

``kubeconfig_errors(path)`` checks the parts of the file the loader reads -- the top-level keys,
each ``clusters``/``users``/``contexts`` entry's ``name`` and body, the string and boolean fields
in them -- and turns every failure of the block it guards into ``KubeconfigError``: the loader's
own ``ConfigException`` messages (a missing context, no current-context) are already sentences and
pass through; anything else it raises names the file and says its shape is wrong.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import urllib3
import yaml
from kubernetes.config import ConfigException

# Per list, the key of an entry's body and that body's fields by the type the loader expects.
_ENTRIES: dict[str, tuple[str, dict[str, type | tuple[type, ...]]]] = {
    "clusters": ("cluster", {"server": str, "certificate-authority": str, "certificate-authority-data": str,
                             "insecure-skip-tls-verify": bool, "tls-server-name": str, "proxy-url": str}),
    "users": ("user", {"token": str, "tokenFile": str, "username": str, "password": str,
                       "client-certificate": str, "client-certificate-data": str, "client-key": str,
                       "client-key-data": str, "auth-provider": dict, "exec": dict}),
    "contexts": ("context", {"cluster": str, "user": str, "namespace": str}),
}
_TYPE_NAMES = {str: "a string", bool: "true or false", dict: "a mapping", list: "a list"}


# URL fields the client builds its connection pool from (urllib3 refuses the others only then), and
# the schemes it takes for them (None: any, the client says "no scheme" later).
_URLS: dict[str, tuple[str, ...] | None] = {"server": None, "proxy-url": ("http", "https", "socks5", "socks5h",
                                                                           "socks4", "socks4a")}


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used; the message names the file and the problem."""


def _kind(expected: type | tuple[type, ...]) -> str:
    return " or ".join(_TYPE_NAMES[t] for t in (expected if isinstance(expected, tuple) else (expected,)))


def check_document(doc: Any, where: str) -> None:
    """Raise ``KubeconfigError`` unless ``doc`` (a parsed kubeconfig) has the shape the loader reads."""
    if doc is None:
        return  # an empty file: the loader says so itself
    if not isinstance(doc, dict):
        raise KubeconfigError(f"kubeconfig {where} is not a mapping of clusters, users and contexts")
    current = doc.get("current-context")
    if current is not None and not isinstance(current, str):
        raise KubeconfigError(f"kubeconfig {where}: current-context must be a context name (a string)")
    for list_key, (body_key, fields) in _ENTRIES.items():
        entries = doc.get(list_key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise KubeconfigError(f"kubeconfig {where}: {list_key} must be a list")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise KubeconfigError(f"kubeconfig {where}: {list_key}[{i}] must be a mapping with a name and a "
                                      f"{body_key}")
            if not isinstance(entry.get("name"), str):
                raise KubeconfigError(f"kubeconfig {where}: {list_key}[{i}] needs a name (a string)")
            body = entry.get(body_key)
            if body is None:
                continue  # the loader names a missing body itself
            if not isinstance(body, dict):
                raise KubeconfigError(f"kubeconfig {where}: the {body_key} of {list_key}[{i}] ({entry['name']}) "
                                      f"must be a mapping")
            for field, expected in fields.items():
                value = body.get(field)
                if value is not None and not isinstance(value, expected):
                    raise KubeconfigError(f"kubeconfig {where}: {field} of {body_key} {entry['name']} must be "
                                          f"{_kind(expected)}")
                if field in _URLS and value:
                    _check_url(value, field, _URLS[field], f"kubeconfig {where}: {field} of {body_key} {entry['name']}")


def _check_url(value: str, field: str, schemes: tuple[str, ...] | None, what: str) -> None:
    try:
        url = urllib3.util.parse_url(value)
    except urllib3.exceptions.LocationParseError:
        raise KubeconfigError(f"{what} is not a URL: {value[:100]!r}") from None
    if schemes is not None and (url.scheme or "") not in schemes:
        raise KubeconfigError(f"{what} must be a URL starting with {', '.join(s + '://' for s in schemes[:2])} "
                              f"or a socks scheme: {value[:100]!r}")


def _paths(config_file: str | None) -> list[str]:
    if config_file is not None:
        return [config_file]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [p for p in env.split(os.pathsep) if p]
    return [os.path.expanduser("~/.kube/config")]


def check_file(path: str) -> None:
    """Read and parse one kubeconfig file and check its shape; ``KubeconfigError`` if it is unusable."""
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        raise KubeconfigError(f"kubeconfig {path} does not exist") from None
    except OSError as exc:
        raise KubeconfigError(f"kubeconfig {path} cannot be read: {exc.strerror or 'I/O error'}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        line = f" at line {exc.problem_mark.line + 1}" if exc.problem_mark is not None else ""
        raise KubeconfigError(f"kubeconfig {path} is not valid YAML{line}: {exc.problem or exc.context}") from None
    except (yaml.YAMLError, ValueError, RecursionError):
        raise KubeconfigError(f"kubeconfig {path} is not valid YAML") from None
    check_document(doc, path)


@contextlib.contextmanager
def kubeconfig_errors(config_file: str | None) -> Iterator[None]:
    """Check the kubeconfig file(s) the block loads, then run it; any failure is a ``KubeconfigError``."""
    paths = _paths(config_file)
    for path in paths:
        if config_file is not None or os.path.exists(path):
            check_file(path)
    where = ", ".join(paths)
    try:
        yield
    except KubeconfigError:
        raise
    except ConfigException as exc:
        raise KubeconfigError(str(exc).strip() or f"kubeconfig {where} cannot be used") from exc
    except OSError as exc:  # a certificate-authority, tokenFile... that names a missing file
        raise KubeconfigError(f"kubeconfig {where} names a file that cannot be read: "
                              f"{exc.filename or 'a file'}: {exc.strerror or 'I/O error'}") from exc
    except Exception as exc:  # noqa: BLE001 -- the loader's bugs on odd values: say which file, not its traceback
        raise KubeconfigError(f"kubeconfig {where} cannot be used: a value in it has the wrong form "
                              f"({str(exc).splitlines()[0][:120] if str(exc) else 'no detail'})") from exc
