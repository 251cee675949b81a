"""Azure's launches that failed after Azure took them, read back from a worker's stop reason
(pure): an ARM deployment that failed or was canceled (`arm-deployment-failed: <code>:
<message>; ...`, wm/providers/azure/arm.py) or a VM whose provisioning failed
(`ProvisioningState/failed/<code>`, states.py). Azure reports capacity that way: the VM PUT
or the deployment is accepted and AllocationFailed comes with its end."""

from __future__ import annotations

from wm.errors import CloudError, ErrorCategory
from wm.providers.azure.arm import REASON_PREFIX
from wm.providers.azure.errors import CAPACITY_CODES, quota_refusal
from wm.providers.azure.states import PROVISIONING_FAILED

ARM_FAILED = (f"{REASON_PREFIX}failed: ", f"{REASON_PREFIX}canceled: ")


def failed_launch(provider_id: str, reason: str | None) -> CloudError | None:
    """The refusal the reason records, classified as the same refusal of a PUT would be (a
    capacity or quota code among a deployment's errors before the others); None for a reason
    that is no failed launch."""
    if not reason:
        return None
    if reason.startswith(PROVISIONING_FAILED):
        leaves = [(reason.removeprefix(PROVISIONING_FAILED), "")]
    elif reason.startswith(ARM_FAILED):
        rest = reason.split(": ", 1)[1]
        leaves = [_leaf(part) for part in rest.split("; ")]
    else:
        return None
    refusals = [(code, message) for code, message in leaves if _category(code, message)]
    code, message = (refusals or leaves)[0]
    category = _category(code, message) or ErrorCategory.BAD_CONFIG
    return CloudError(provider_id, category, code or "LaunchFailed", message, operation="launch")


def _leaf(text: str) -> tuple[str, str]:
    code, found, message = text.partition(": ")
    return (code.strip(), message) if found else ("", text)


def _category(code: str, message: str) -> ErrorCategory | None:
    lower = code.lower()
    if lower in CAPACITY_CODES:
        return ErrorCategory.CAPACITY
    if quota_refusal(lower, message):
        return ErrorCategory.QUOTA
    return None
