"""Taskcluster's schemas for the bodies of worker-manager's API requests, as data for
wm.pools.json_check (which endpoint takes which: the endpoint table, wm/api/endpoint_table.py).

Taskcluster checks every request body against its endpoint's schema before the handler runs
(TC `libraries/api/src/middleware/schema.js`; `libraries/validate`: ajv 8, draft-06 schemas,
ajv-formats, no type coercion) and answers 400 InputValidationError to a body it refuses. wm
checks the same schemas the same way (wm.api.models runs them before anything reads a body),
so nothing is coerced: "yes" is no boolean, "5" no integer, a number no date-time.

Transcribed from services/worker-manager/schemas/v1/register-worker-request.yml,
reregister-worker-request.yml, report-worker-error-request.yml and create-worker-request.yml
(rendered in `generated/references.json`, taskcluster/taskcluster @ 9d59eb59); the pool
definition bodies are wm.pools.schemas' CREATE_BODY and UPDATE_BODY.
tests/unit/test_api_request_bodies.py compares the verdicts with the published schemas
(tests/fixtures/tc_schemas).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wm.pools.json_check import Schema
from wm.pools.schemas import IDENTIFIER, POOL_ID

REPORT_TEXT_MAX_CHARS = 128  # a report's kind and title
REPORT_DESCRIPTION_MAX_CHARS = 10240

_STRING: Schema = {"type": "string"}
SECRET: Schema = {
    "type": "string",
    "pattern": "[a-zA-Z0-9_-]{44}",
    "hint": "must be 44 letters, digits, '-' or '_'",
}


def _closed(properties: Mapping[str, Schema], required: Sequence[str]) -> Schema:
    return {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "required": list(required),
    }


# The proof's forms by provider type, in the schema's order; the key that tells each apart.
_PROOF_FORMS: tuple[tuple[str, Schema], ...] = (
    ("token", _closed({"token": _STRING}, ["token"])),  # google
    ("staticSecret", _closed({"staticSecret": SECRET}, ["staticSecret"])),  # static
    # aws: a document and its signature
    ("signature", _closed({"document": _STRING, "signature": _STRING}, ["document", "signature"])),
    ("document", _closed({"document": _STRING}, ["document"])),  # azure: an attested document
)


def _proof_form(value: Any) -> int | None:
    """The form a proof means to be (to name what is wrong with it), or None for no form."""
    if not isinstance(value, Mapping):
        return None
    return next((i for i, (key, _) in enumerate(_PROOF_FORMS) if key in value), None)


WORKER_IDENTITY_PROOF: Schema = {
    "oneOf": [form for _, form in _PROOF_FORMS],
    "pick": _proof_form,
    "none": "must be one provider type's proof: {token} (google), {staticSecret} (static), "
    "{document, signature} (aws) or {document} (azure)",
}

REGISTER_BODY: Schema = _closed(
    {
        "workerPoolId": POOL_ID,
        "providerId": IDENTIFIER,
        "workerGroup": IDENTIFIER,
        "workerId": IDENTIFIER,
        "workerIdentityProof": WORKER_IDENTITY_PROOF,
        "systemBootTime": {"type": "string", "format": "date-time"},
    },
    ["workerPoolId", "providerId", "workerGroup", "workerId", "workerIdentityProof"],
)

REREGISTER_BODY: Schema = _closed(
    {
        "workerPoolId": POOL_ID,
        "workerGroup": IDENTIFIER,
        "workerId": IDENTIFIER,
        "secret": SECRET,
    },
    ["workerPoolId", "workerGroup", "workerId", "secret"],
)

REPORT_ERROR_BODY: Schema = _closed(
    {
        "workerGroup": IDENTIFIER,
        "workerId": IDENTIFIER,
        "kind": {
            "type": "string",
            "maxLength": REPORT_TEXT_MAX_CHARS,
            # The schema's `[-a-z0-9]+` is not anchored: it asks for one such character
            # anywhere. json_check matches patterns whole, hence the `[\s\S]*` either side.
            "pattern": r"[\s\S]*[-a-z0-9][\s\S]*",
            "hint": "must hold a lower-case letter, a digit or '-'",
        },
        "title": {"type": "string", "maxLength": REPORT_TEXT_MAX_CHARS},
        "description": {"type": "string", "maxLength": REPORT_DESCRIPTION_MAX_CHARS},
        "extra": {"type": "object"},
    },
    ["workerGroup", "workerId", "kind", "title", "description", "extra"],
)

# create-worker-request.yml, which updateWorker takes too: the capacity is worker-full's, the
# provider's information the static provider type's (the only form: oneOf of one).
WORKER_BODY: Schema = {
    "type": "object",
    "properties": {
        "expires": {"type": "string", "format": "date-time"},
        "capacity": {"type": "integer", "minimum": 1},
        "providerInfo": {"oneOf": [_closed({"staticSecret": SECRET}, ["staticSecret"])]},
    },
    "additionalProperties": False,
    "required": ["expires"],
}
