"""The credentials of a local control plane: a CA, the API server's serving certificate, the
service-account signing key, and bearer tokens for each component and the admin.

All of it is generated per cluster into its run directory (mode 0600 for secrets) and never leaves
it: the cluster is local and disposable, so nothing here is meant to be kept or rotated. Tokens
(``--token-auth-file``) rather than client certificates, because they make the kubeconfig and the
components' configuration one line each; the groups give each identity exactly what the API
server's bootstrap RBAC grants the real component (``system:kube-controller-manager`` and
``system:kube-scheduler`` are bootstrap users), and ``system:masters`` for the admin and kwok (which
writes node and pod status as a kubelet would).
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
"""Service ClusterIPs are allocated from here; nothing ever connects to them (no kube-proxy)."""
KUBERNETES_SERVICE_IP = "10.0.0.1"
SERVING_DNS = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
               "kubernetes.default.svc.cluster.local")
SERVING_IPS = ("127.0.0.1", "::1", KUBERNETES_SERVICE_IP)
VALIDITY = datetime.timedelta(days=30)

# identity -> (user name, uid, groups)
IDENTITIES = {
    "admin": ("ctrlscope-admin", "ctrlscope-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", "kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", "kube-scheduler", ()),
    "kwok": ("kwok", "kwok", ("system:masters",)),
}


@dataclass(frozen=True)
class Credentials:
    """Paths of the generated files, and the bearer token of each identity."""

    directory: Path
    tokens: dict[str, str]

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_pub(self) -> Path:
        return self.directory / "sa.pub"

    @property
    def token_file(self) -> Path:
        return self.directory / "tokens.csv"


def generate(directory: Path) -> Credentials:
    """Write a fresh CA, serving certificate, service-account key pair and token file into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key, cert, key = serving_certificate(ca_name="ctrlscope-realcluster-ca", name="kube-apiserver",
                                                     dns=SERVING_DNS, ips=SERVING_IPS)
    sa_key = ec.generate_private_key(ec.SECP256R1())
    tokens = {identity: secrets.token_urlsafe(32) for identity in IDENTITIES}
    creds = Credentials(directory, tokens)
    _write(creds.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM))
    _write(directory / "ca.key", private_pem(ca_key), secret=True)
    _write(creds.serving_cert, cert.public_bytes(serialization.Encoding.PEM))
    _write(creds.serving_key, private_pem(key), secret=True)
    _write(creds.service_account_key, private_pem(sa_key), secret=True)
    _write(creds.service_account_pub, sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    rows = []
    for identity, (user, uid, groups) in IDENTITIES.items():
        group_field = f',"{",".join(groups)}"' if groups else ""
        rows.append(f"{tokens[identity]},{user},{uid}{group_field}")
    _write(creds.token_file, ("\n".join(rows) + "\n").encode(), secret=True)
    return creds


def serving_certificate(*, ca_name: str, name: str, dns: tuple[str, ...], ips: tuple[str, ...],
                        validity: datetime.timedelta = VALIDITY
                        ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey, x509.Certificate,
                                   ec.EllipticCurvePrivateKey]:
    """A fresh CA and a TLS serving certificate it signed for ``dns`` names and ``ips``:
    ``(ca_cert, ca_key, cert, key)``. Clients trust the CA (a kubeconfig's certificate-authority)."""
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)  # tolerate clock skew
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_subject).issuer_name(ca_subject)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now).not_valid_after(now + validity)
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False,
                                            encipher_only=False, decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    sans = [x509.DNSName(n) for n in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + validity)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return ca_cert, ca_key, cert, key


def private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """``key`` as unencrypted PKCS#8 PEM."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write(path: Path, data: bytes, *, secret: bool = False) -> None:
    path.write_bytes(data)
    if secret:
        path.chmod(0o600)
