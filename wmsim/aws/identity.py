"""EC2 instance identity documents: the document IMDS serves for an instance, and its RSA-SHA256
signature with the sim's own key (whose certificate a provider config trusts)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from wmsim.trust import self_signed, signing_key

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import rsa


IDENTITY_KEY_NAME = "ec2-identity"
IDENTITY_TRUST_FILE = "ec2-identity-certificate.pem"
IDENTITY_DOCUMENT_VERSION = "2017-09-30"
IDENTITY_STATES = frozenset({"pending", "running", "stopping", "stopped", "shutting-down"})


def identity_document(account_id: str, region: str, inst: Any) -> dict[str, Any]:
    """The identity document fields of a moto instance, as IMDS reports them."""
    return {
        "accountId": account_id,
        "architecture": getattr(inst, "architecture", None) or "x86_64",
        "availabilityZone": inst.placement.zone,
        "billingProducts": None,
        "devpayProductCodes": None,
        "marketplaceProductCodes": None,
        "imageId": inst.image_id,
        "instanceId": inst.id,
        "instanceType": inst.instance_type,
        "kernelId": None,
        "pendingTime": inst.launch_time.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "privateIp": inst.private_ip,
        "ramdiskId": None,
        "region": region,
        "version": IDENTITY_DOCUMENT_VERSION,
    }


def sign_identity_document(document: Mapping[str, Any], key: rsa.RSAPrivateKey) -> dict[str, str]:
    """IMDS's text of the document and its base64 RSA-SHA256 signature (wrapped in lines, as
    IMDS wraps it)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    text = json.dumps(document, indent=2, separators=(",", " : "))
    signature = key.sign(text.encode(), padding.PKCS1v15(), hashes.SHA256())
    return {"document": text, "signature": base64.encodebytes(signature).decode().strip()}


@lru_cache(maxsize=1)
def identity_certificate() -> x509.Certificate:
    return self_signed(signing_key(IDENTITY_KEY_NAME), "ec2-identity.wm-sim.invalid")
