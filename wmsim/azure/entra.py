"""Entra ID as far as azure-identity's ClientSecretCredential goes: the tenant's OpenID
configuration and the token endpoint. Any client id with a secret (or an assertion) gets a
bearer token the simulated ARM accepts (`TOKEN_PREFIX`), across restarts.
"""

from __future__ import annotations

import secrets

from werkzeug.wrappers import Request, Response

from wmsim.azure.resources import _json

TOKEN_PREFIX = "sim-arm."  # any bearer token with this prefix is accepted, across restarts
TOKEN_LIFETIME_S = 3599


def openid_configuration(endpoint: str, tenant: str) -> Response:
    base = f"{endpoint}/{tenant}"
    return _json(
        {
            "token_endpoint": f"{base}/oauth2/v2.0/token",
            "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
            "issuer": f"{base}/v2.0",
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
            "response_types_supported": ["code", "id_token", "token"],
            "tenant_region_scope": "WW",
        }
    )


def token(request: Request) -> Response:
    form = request.form
    if not form.get("client_id") or not (form.get("client_secret") or form.get("client_assertion")):
        return _json(
            {
                "error": "invalid_client",
                "error_description": "AADSTS7000215: Invalid client secret provided.",
            },
            400,
        )
    return _json(
        {
            "token_type": "Bearer",
            "expires_in": TOKEN_LIFETIME_S,
            "ext_expires_in": TOKEN_LIFETIME_S,
            "access_token": TOKEN_PREFIX + secrets.token_hex(16),
        }
    )
