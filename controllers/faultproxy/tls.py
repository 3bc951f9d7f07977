"""The fault proxy's own TLS: a CA and a serving certificate made afresh for each run.

The proxy checks a bearer token of its own on every request, and clients send a bearer token only
over TLS: kubectl and client-go leave it off a plain ``http://`` server (checked with kubectl 1.32:
no ``Authorization`` header at all). So the proxy serves HTTPS on loopback with a certificate for
``localhost``, ``127.0.0.1`` and ``::1``, signed by a CA nobody else has; its kubeconfig carries that
CA (``certificate-authority-data``), and every client verifies the proxy like any API server.

Both keys live in memory only: the serving key passes through a private temporary directory just
long enough for ``ssl`` to load it (it reads files only), and the CA key is never written anywhere.
"""

from __future__ import annotations

import datetime
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from controllers.realcluster.pki import private_pem, serving_certificate

VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class ProxyTLS:
    """The server side (``context``) and what clients trust (``ca_pem``)."""

    context: ssl.SSLContext
    ca_pem: bytes


def make_tls() -> ProxyTLS:
    ca_cert, _, cert, key = serving_certificate(ca_name="ctrlscope-faultproxy-ca", name="ctrlscope-faultproxy",
                                                dns=("localhost",), ips=("127.0.0.1", "::1"), validity=VALIDITY)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory(prefix="ctrlscope-faultproxy-") as directory:  # mode 0700
        cert_path, key_path = Path(directory, "tls.crt"), Path(directory, "tls.key")
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.touch(mode=0o600)
        key_path.write_bytes(private_pem(key))
        context.load_cert_chain(cert_path, key_path)
    return ProxyTLS(context, ca_cert.public_bytes(serialization.Encoding.PEM))
