"""An identity provider with two real users, for tests of per-user scoping
(`--ServerApp.identity_provider_class=jupyter_mcp.testing.identity.TwoUsers`).

Tokens: 'alice-token' is alice, 'bob-token' is bob (sent as `Authorization: token T`).
"""

from __future__ import annotations

from jupyter_server.auth.identity import IdentityProvider, User

TOKENS = {"alice-token": "alice", "bob-token": "bob"}


class TwoUsers(IdentityProvider):
    def get_user(self, handler):
        match = self.auth_header_pat.match(handler.request.headers.get("Authorization", ""))
        name = TOKENS.get(match.group(2) if match else "")
        if name is None:
            return None
        handler._token_authenticated = True  # header-token requests skip XSRF, as Jupyter's own do
        return User(username=name, name=name, display_name=name.title())
