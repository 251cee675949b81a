"""Microsoft's roots and intermediates for Azure attested data, as worker-manager ships them
(the files and certificates.json in azure_ca_certs/, see its README.md)."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from cryptography import x509

PACKAGE_DIR = "azure_ca_certs"


@lru_cache(maxsize=1)
def bundled() -> tuple[tuple[x509.Certificate, ...], tuple[x509.Certificate, ...]]:
    """(roots, intermediates): the entries certificates.json marks `root`, and the others."""
    directory = resources.files(__package__).joinpath(PACKAGE_DIR)
    listing = json.loads(directory.joinpath("certificates.json").read_text())
    roots: list[x509.Certificate] = []
    intermediates: list[x509.Certificate] = []
    for entry in listing:
        pem = directory.joinpath(entry["filename"]).read_bytes()
        (roots if entry.get("root") else intermediates).append(x509.load_pem_x509_certificate(pem))
    return tuple(roots), tuple(intermediates)
