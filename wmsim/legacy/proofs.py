"""What a worker's identity proof names, read by its shape as worker-runner sends it: an EC2
instance identity document `{document, signature}` names `instanceId`, a GCE identity token
`{token}` names `google.compute_engine.instance_id`, Azure attested data `{document}` (base64
PKCS#7) names `vmId`.

The stand-in checks only that the proof names the VM it made for the worker; it does not check
the signatures (the AWS RSA signature, Google's JWT signature, the attested data's PKCS#7 chain):
that is wm's business in its own tests, and the stand-in only has to refuse a worker that
claims another VM's registration.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from typing import Any

ATTESTED_VM_ID = re.compile(rb'"vmId"\s*:\s*"([^"]+)"')


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(
        text.replace("+", "-").replace("/", "_") + "=" * (-len(text) % 4)
    )


def proof_vm_id(proof: Mapping[str, Any]) -> str | None:
    """The VM id the proof names; None when it is of no known shape or unreadable."""
    try:
        if isinstance(proof.get("signature"), str) and isinstance(proof.get("document"), str):
            return str(json.loads(proof["document"])["instanceId"])
        if isinstance(proof.get("token"), str):
            claims = json.loads(_b64(proof["token"].split(".")[1]))
            return str(claims["google"]["compute_engine"]["instance_id"])
        if isinstance(proof.get("document"), str):
            found = ATTESTED_VM_ID.search(_b64(proof["document"]))
            return found.group(1).decode() if found else None
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return None
