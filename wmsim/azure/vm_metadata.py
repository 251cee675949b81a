"""Each simulated VM's metadata service (IMDS) and the attested data it signs: what the VM's
IMDS serves at /_vm/<VM name>/metadata/... (wmsim/metadata.py for the addressing,
wmsim/azure/imds.py for the paths), and attested documents, genuine or forged for tests
(wmsim/azure/attested.py).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from werkzeug.wrappers import Request, Response

from wmsim import metadata
from wmsim.azure import attested
from wmsim.azure import imds as imds_azure
from wmsim.azure.arm_state import ArmState
from wmsim.azure.resources import _json, _key, _Vm
from wmsim.azure.vm_views import vm_phase
from wmsim.trust import TrustDir

IDENTITY_TRUST_FILE = "arm-identity-root.pem"


class VmMetadata(ArmState):
    _trust: TrustDir
    _identity_path: Path | None

    # -- attested data -----------------------------------------------------------------------

    @property
    def identity_trust_path(self) -> Path:
        """PEM of the simulated Microsoft root that attested data chains to, and of the issuing
        CA that signs it (documents carry the leaf alone, as genuine ones do)."""
        with self._lock:
            if self._identity_path is None:
                path = self._trust.path(IDENTITY_TRUST_FILE)
                path.write_bytes(attested.trust_pem())
                self._identity_path = path
            return self._identity_path

    def attested_document(self, cloud_id_or_name: str, nonce: str | None = None) -> dict[str, str]:
        """What the VM's worker-runner posts to register: {"document"} (it asks for no nonce)."""
        return self.mint_attested(cloud_id_or_name, nonce)

    def mint_attested(
        self,
        cloud_id_or_name: str,
        nonce: str | None = None,
        *,
        changes: Mapping[str, Any] | None = None,
        signer: attested.Signer | None = None,
        created_on: dt.datetime | None = None,
        lifetime_s: float = attested.DOCUMENT_LIFETIME_S,
        signed_attributes: bool = False,
        detached: bool = False,
    ) -> dict[str, str]:
        """Attested data of the VM with `changes` to its content, another `signer`, other
        times, signed attributes or a detached signature: forgeries for tests."""
        with self._lock:
            vm = self._find(cloud_id_or_name)
            if vm.deleted_at is not None or vm.power or vm.failure:
                raise KeyError(f"VM {cloud_id_or_name!r} is not running: no metadata service")
            vm_id, subscription = vm.vm_id, vm.id.split("/")[2]
        content = attested.attested_content(
            # Like IMDS: without a nonce, the current time stands in for one.
            nonce=nonce or str(int(time.time())),
            vm_id=vm_id,
            subscription_id=subscription,
            created_on=created_on,
            lifetime_s=lifetime_s,
        )
        content.update(changes or {})
        document = attested.sign_attested(
            content, signer, signed_attributes=signed_attributes, detached=detached
        )
        return {"document": document}

    # -- per-VM metadata service -------------------------------------------------------------

    def metadata_view(self, key: str) -> imds_azure.AzureVmView:
        """What the VM's IMDS serves; KeyError when it has none (unknown, booting, stopped,
        failed or being deleted)."""
        with self._lock:
            vm = self._find(key)
            if vm_phase(vm) != "running" or vm.power or vm.failure:
                raise KeyError(key)
            parts = vm.id.split("/")
            os_profile = vm.properties.get("osProfile") or {}
            return imds_azure.AzureVmView(
                name=vm.name,
                resource_id=vm.id,
                subscription_id=parts[2],
                resource_group=parts[4],
                location=vm.location,
                vm_id=vm.vm_id,
                vm_size=str((vm.properties.get("hardwareProfile") or {}).get("vmSize", "")),
                priority="Spot" if vm.spot else "Regular",
                tags=dict(vm.tags),
                user_data=vm.user_data or "",
                os_profile={
                    "adminUsername": os_profile.get("adminUsername", ""),
                    "computerName": os_profile.get("computerName", vm.name),
                    "disablePasswordAuthentication": "false",
                },
                addresses=self._addresses(vm),
                eviction_at=metadata.announced(
                    self.preemptions.due_at(vm.id), imds_azure.EVICTION_NOTICE_S
                ),
                attested=lambda nonce, name=vm.name: self.attested_document(
                    name, nonce or time.strftime("%Y%m%d-%H%M%S", time.gmtime())
                )["document"],
            )

    def _addresses(self, vm: _Vm) -> tuple[tuple[str, str], ...]:
        out = []
        for ref in (vm.properties.get("networkProfile") or {}).get("networkInterfaces") or []:
            nic = self._resources.get(_key(str(ref.get("id", ""))))
            configs = (nic.properties.get("ipConfigurations") or []) if nic else []
            if not configs:
                continue
            props = configs[0].get("properties") or {}
            ip = self._resources.get(_key(str((props.get("publicIPAddress") or {}).get("id", ""))))
            public = str(ip.properties.get("ipAddress", "")) if ip else ""
            out.append((str(props.get("privateIPAddress", "")), public))
        return tuple(out)

    def _metadata(self, request: Request, key: str, path: str) -> Response:
        try:
            view = self.metadata_view(key)
        except KeyError:
            return _json({"error": "Not found"}, 404)
        headers = {k.lower(): v for k, v in request.headers.items()}
        found = imds_azure.answer(view, request.method, path, dict(request.args), headers)
        return Response(found.body, status=found.status, content_type=found.content_type)
