"""ARM's error answers: `ArmError` (a status code and ARM's `{"error": {"code", "message"}}`),
its response, and the errors more than one resource route gives in the same words.
"""

from __future__ import annotations

from typing import Any

from werkzeug.wrappers import Request, Response

from wmsim.azure.resources import IP_TYPE, NIC_TYPE, _json, _Resource, canonical_location
from wmsim.azure.template_functions import type_and_name


class ArmError(Exception):
    """An ARM error answer: status code plus `{"error": {"code", "message"[, "target"]}}`."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        target: str | None = None,
        details: list[dict[str, Any]] | None = None,
        **headers: str,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.target = target
        self.details = details  # ARM's inner errors, e.g. of InvalidTemplateDeployment
        self.headers = headers

    def as_json(self) -> dict[str, Any]:
        """The `error` object of ARM's answer (also a deployment operation's error)."""
        detail: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.target:
            detail["target"] = self.target
        if self.details:
            detail["details"] = self.details
        return detail


def error_answer(error: ArmError) -> Response:
    response = _json({"error": error.as_json()}, error.status)
    for name, value in error.headers.items():
        response.headers[name.replace("_", "-")] = value
    if error.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer error="invalid_token"'
    return response


def server_error(request: Request) -> ArmError:
    """ARM's 5xx: a read is unavailable, a write failed inside."""
    if request.method == "GET":
        return ArmError(
            503, "ServiceUnavailable", "The service is temporarily unavailable. Please retry later."
        )
    return ArmError(
        500, "InternalServerError", "An internal execution error occurred. Retry later."
    )


def invalid(message: str, target: str) -> ArmError:
    return ArmError(400, "InvalidParameter", message, target=target)


def missing(parameter: str) -> ArmError:
    return invalid(f"Required parameter '{parameter}' is missing (null).", parameter)


def required_location(body: dict[str, Any]) -> str:
    """The location of a PUT's body, as ARM compares them; 400 LocationRequired without one."""
    location = canonical_location(str(body.get("location") or ""))
    if not location:
        raise ArmError(400, "LocationRequired", "The location property is required.")
    return location


def unknown_reference(reference: Any, referrer: str, hint: str = "") -> ArmError:
    """A resource a body refers to by id that is not there: 400 InvalidResourceReference."""
    return ArmError(
        400,
        "InvalidResourceReference",
        f"Resource {reference} referenced by resource {referrer} was not found.{hint}",
    )


def not_found(rid: str) -> ArmError:
    """A resource of a resource group that is not there (a VM, network, image, spec ...)."""
    rtype, name = type_and_name(rid)
    return ArmError(
        404,
        "ResourceNotFound",
        f"The Resource '{rtype}/{name}' under resource group '{rid.split('/')[4]}' was not found.",
    )


def in_use(resource: _Resource) -> ArmError:
    if resource.type == NIC_TYPE:
        return ArmError(
            400,
            "NicInUse",
            f"Network Interface {resource.id} is used by existing resource {resource.owner}. "
            "In order to delete the network interface, it must be dissociated from the resource.",
        )
    if resource.type == IP_TYPE:
        return ArmError(
            400,
            "PublicIPAddressCannotBeDeleted",
            f"Public IP address {resource.id} can not be deleted since it is still allocated to "
            f"resource {resource.owner}.",
        )
    return ArmError(
        409, "OperationNotAllowed", f"Disk {resource.name} is attached to VM {resource.owner}."
    )
