"""The simulated ARM's /_sim/ control routes, for tests and the demo (not counted, not
faulted): request counts, behaviour, the VMs and resources held, the VM PUTs recorded, images,
killing, removing or failing a VM, attested data; deployments.py adds its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from werkzeug.wrappers import Request, Response

from wmsim.azure.arm_state import ArmState
from wmsim.azure.resources import _json
from wmsim.azure.vm_views import sim_vm_json


class Control(ArmState):
    def _control(self, request: Request, path: list[str]) -> Response:
        body = request.get_json(silent=True) or {}
        found = self.deployments.control(request.method, path, body, dict(request.args))
        if found is not None:
            return found
        match request.method, path:
            case "GET", ["requests"]:
                return _json(self.faults.counts())
            case "POST", ["requests", "reset"]:
                self.faults.reset_counts()
            case "POST", ["behaviour"]:
                try:
                    self.faults.behaviour.update(**body)
                except ValueError as exc:
                    return _json({"error": str(exc)}, 400)
            case "GET", ["instances"]:
                return _json([sim_vm_json(vm) for vm in self.instances()])
            case "GET", ["resources"]:
                return _json(self.resources())
            case "GET", ["vm-puts"]:
                return _json([put.as_json() for put in self.vm_puts(request.args.get("name"))])
            case "POST", ["images"]:
                if not body.get("id"):
                    return _json({"error": 'body must be {"id": <image resource id>}'}, 400)
                self.register_image(str(body["id"]), str(body.get("location") or "eastus"))
            case "POST", ["kill"]:
                return self._control_vm(
                    lambda: self.kill(body["id"], body.get("reason") or "preempted")
                )
            case "POST", ["remove"]:
                return self._control_vm(lambda: self.remove(body["id"]))
            case "POST", ["fail"]:
                return self._control_vm(lambda: self.fail(body["id"]))
            case "POST", ["reset"]:
                self.reset()
            case "POST", ["signal-fates"]:
                try:
                    self.signal_fates.force(str(body["operation"]), *body["fates"])
                except (KeyError, ValueError) as exc:
                    return _json({"error": str(exc)}, 400)
            case "GET", ["attested", vm_name]:
                nonce = request.args.get("nonce") or None
                return self._control_vm_json(lambda: self.attested_document(vm_name, nonce))
            case _:
                return _json({"error": f"no control route {request.method} {request.path}"}, 404)
        return _json({"ok": True})

    @staticmethod
    def _control_vm_json(action: Callable[[], Any]) -> Response:
        try:
            return _json(action())
        except KeyError as exc:
            return _json({"error": f"no such VM: {exc}"}, 404)

    @staticmethod
    def _control_vm(action: Callable[[], None]) -> Response:
        try:
            action()
        except KeyError as exc:
            return _json({"error": f"no such VM: {exc}"}, 404)
        return _json({"ok": True})
