# SPDX-License-Identifier: MIT
"""A certificate authority and a server certificate of the tests' own, made with `openssl`.

The TLS tests need a server whose certificate the client can check (given
the authority), cannot check (not given it), and that names another host
than the one the client dialled. One certificate does all three: it is
signed by a throw-away authority and names only `localhost`, so dialling
127.0.0.1 is a host-name mismatch and dialling `localhost` is not.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .conftest import unreachable


@dataclass(frozen=True)
class Certs:
    """Where the authority's certificate and the server's certificate and key are."""

    ca: Path
    cert: Path
    key: Path


def make_certs(folder: Path, *, host: str = "localhost") -> Certs:
    """A new authority in `folder`, and a certificate it signed for `host` (and only it)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        unreachable("openssl", "`openssl` is not on PATH, so no test certificate can be made")
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    cert, key, request = folder / "server.crt", folder / "server.key", folder / "server.csr"
    names = folder / "names.ext"
    names.write_text(f"subjectAltName=DNS:{host}\n")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True)

    run(
        *("req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca), "-days", "2"),
        *("-subj", "/CN=rainier-queue test authority"),
    )
    run("req", *ec, "-keyout", str(key), "-out", str(request), "-subj", f"/CN={host}")
    run(
        *("x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key)),
        *("-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(names)),
    )
    key.chmod(0o600)
    return Certs(ca=ca, cert=cert, key=key)
