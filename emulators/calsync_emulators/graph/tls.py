"""A throw-away TLS identity for the emulators: msal only talks to https authorities, so Entra's must be https.

A self-signed certificate for ``127.0.0.1`` and ``localhost``, written to a temporary directory; clients trust
it through its PEM file (``CALSYNC_GRAPH_CA_FILE``). An emulator feature of ours, not a Microsoft one.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class TlsIdentity:
    """The certificate clients must trust and the server context that presents it."""

    ca_file: Path
    context: ssl.SSLContext


def self_signed(directory: Path | None = None) -> TlsIdentity:
    """A fresh key and certificate (valid one day) for the loopback names, and a server context serving them."""
    where = directory or Path(tempfile.mkdtemp(prefix="calsync-emulator-tls-"))
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "calsync emulator")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = where / "emulator-cert.pem", where / "emulator-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    return TlsIdentity(cert_file, context)
