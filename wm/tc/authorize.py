"""An endpoint's scope check, from authentication outcome to Taskcluster's error reply.

Source: TC `libraries/api/src/middleware/auth.js` `req.authorize` (taskcluster/taskcluster
@ 9d59eb59): render the endpoint's template with the parameters; an endpoint without scopes is
public and never authenticates; otherwise a failed authentication is `AuthenticationFailed`
(401, `www-authenticate: hawk`) and scopes that do not satisfy the expression are
`InsufficientScopes` (403) naming what is missing, or asking for credentials when the request
carried none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from wm.tc.errors import TaskclusterError, authentication_failed, insufficient_scopes
from wm.tc.hawk import Authenticated, AuthenticationFailed
from wm.tc.scopes import ScopeExpression, missing_scopes, render, satisfies


def authorize(
    template: ScopeExpression | None,
    params: Mapping[str, object],
    authenticate: Callable[[], Authenticated],
) -> Authenticated | None:
    """Who may proceed, or raise TaskclusterError; None for a public endpoint.

    `authenticate` is called only when the endpoint has scopes, as Taskcluster defers it.
    """
    if template is None:
        return None
    required = render(template, params)
    try:
        who = authenticate()
    except AuthenticationFailed as failure:
        raise authentication_failed(str(failure)) from failure
    if not satisfies(who.scopes, required):
        raise _insufficient(who, required)
    return who


def _insufficient(who: Authenticated, required: ScopeExpression) -> TaskclusterError:
    if who.client_id is None:
        return insufficient_scopes(None, required, None)
    return insufficient_scopes(who.client_id, required, missing_scopes(who.scopes, required))
