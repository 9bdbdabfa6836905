"""Real users for tests of per-user scoping and permissions.

`--ServerApp.identity_provider_class=jupyter_mcp.testing.identity.TwoUsers`: tokens
'alice-token' (alice), 'bob-token' (bob), 'carol-token' (carol) and 'dave-token' (dave),
sent as `Authorization: token T`.

`--ServerApp.authorizer_class=jupyter_mcp.testing.identity.Restricted`: alice may do
anything; bob may only read (and reach /mcp); carol may do anything but make sessions;
dave may reach /mcp and nothing else.
"""

from __future__ import annotations

from jupyter_server.auth.authorizer import Authorizer
from jupyter_server.auth.identity import IdentityProvider, User

TOKENS = {"alice-token": "alice", "bob-token": "bob", "carol-token": "carol", "dave-token": "dave"}


class TwoUsers(IdentityProvider):
    def get_user(self, handler):
        match = self.auth_header_pat.match(handler.request.headers.get("Authorization", ""))
        name = TOKENS.get(match.group(2) if match else "")
        if name is None:
            return None
        handler._token_authenticated = True  # header-token requests skip XSRF, as Jupyter's own do
        return User(username=name, name=name, display_name=name.title())


class Restricted(Authorizer):
    def is_authorized(self, handler, user, action, resource):
        if user.username == "bob":
            return action == "read" or resource == "mcp"
        if user.username == "dave":
            return resource == "mcp"
        if user.username == "carol":
            return not (resource == "sessions" and action == "write")
        return True
