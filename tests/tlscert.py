"""A throwaway certificate authority and a server certificate for 127.0.0.1, for tests that
prove a client trusts an extra CA only because it was told to (the Action's `ca-bundle`)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from buildonce import build_lock
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class TestPki:
    ca: Path  # the CA certificate (PEM): what a client must be given to trust the server
    cert: Path  # the server's certificate chain (PEM)
    key: Path  # the server's private key (PEM)


def make_pki(dest: Path, ip: str = "127.0.0.1", days: int = 1) -> TestPki:
    """A new CA (valid `days` days) and a certificate it signed for `ip`, written under `dest`."""
    now = datetime.datetime.now(datetime.UTC)
    valid_from, valid_to = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))])
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "docdelta test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(valid_from).not_valid_after(valid_to)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ip)])).issuer_name(ca_name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(valid_from).not_valid_after(valid_to)
        .add_extension(san, critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    dest.mkdir(parents=True, exist_ok=True)
    pki = TestPki(ca=dest / "ca.pem", cert=dest / "server.pem", key=dest / "server.key")
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    pki.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return pki


def lasting_pki(dest: Path, ip: str = "127.0.0.1") -> TestPki:
    """`make_pki`'s files kept in `dest` and reused while the CA has a day left. A CA that
    ends up in an image (the Action's `ca-bundle` is trusted in the agent image it builds)
    must not change with every test run, or every run builds that image again."""
    with build_lock(str(dest)):
        pki = TestPki(ca=dest / "ca.pem", cert=dest / "server.pem", key=dest / "server.key")
        if all(p.is_file() for p in (pki.ca, pki.cert, pki.key)):
            expires = x509.load_pem_x509_certificate(pki.ca.read_bytes()).not_valid_after_utc
            if expires - datetime.datetime.now(datetime.UTC) > datetime.timedelta(days=1):
                return pki
        return make_pki(dest, ip, days=30)
