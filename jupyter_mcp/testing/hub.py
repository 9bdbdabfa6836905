"""A real JupyterHub for integration tests: the hub from the installed package, a real
configurable-http-proxy, and one `jupyterhub-singleuser` process per user (jupyter-mcp is
enabled in it as in any install), each with its own workspace folder.

The hub runs DummyAuthenticator and SimpleLocalProcessSpawner (no system users needed; as
root the servers get `--allow-root`), on free ports, in its own directory; its log (the
single-user servers write into it too) is kept for failure messages. A service token with
admin scopes creates users, starts and stops servers and issues tokens with chosen scopes.

The single-user servers use ``HubScopesAuthorizer``: JupyterHub 6 itself only checks
``access:servers``; granular permissions are the custom scopes
``custom:jupyter_server:<action>:<resource>`` and an authorizer that reads them, as
JupyterHub documents (its examples/read-only). Every user may do everything on their
own server; a token asked with fewer scopes may do less.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from jupyterhub.singleuser.extension import JupyterHubAuthorizer

from .live import answers, end_process, free_port, wait_until
from .npm import npm_tool

PROXY_PACKAGE = "configurable-http-proxy@5.3.0"
ACTIONS = ("read", "write", "execute")
# Jupyter Server's resources with a scope of their own (the rest only through `<action>:*`)
RESOURCES = ("contents", "kernels", "sessions", "mcp")


def install_proxy(prefix: Path) -> Path:
    """configurable-http-proxy from npm into ``prefix`` (once); its binary."""
    return npm_tool(PROXY_PACKAGE, prefix, "configurable-http-proxy")


def scope(action: str, resource: str = "*", user: str | None = None) -> str:
    """A Jupyter Server permission as a JupyterHub custom scope, on ``user``'s server if given."""
    return f"custom:jupyter_server:{action}:{resource}" + (f"!user={user}" if user else "")


class HubScopesAuthorizer(JupyterHubAuthorizer):
    """Allows an action on a resource to a token holding its custom scope (or ``<action>:*``)
    for this server's user (JupyterHub's examples/read-only authorizer)."""

    def is_authorized(self, handler, user, action, resource):
        owner, server = os.environ["JUPYTERHUB_USER"], os.environ.get("JUPYTERHUB_SERVER_NAME", "")
        wanted = {scope(action, name) + where for name in (resource, "*")
                  for where in (f"!user={owner}", f"!server={owner}/{server}")}
        return bool(self.hub_auth.check_scopes(wanted, user.hub_user))


def _custom_scopes() -> dict[str, dict]:
    scopes: dict[str, dict] = {}
    for action in ACTIONS:
        for resource in RESOURCES:
            scopes[scope(action, resource)] = {"description": f"{action} on {resource} in a Jupyter server"}
        scopes[scope(action)] = {"description": f"{action} on anything in a Jupyter server",
                                 "subscopes": [scope(action, resource) for resource in RESOURCES]}
    return scopes


class Hub:
    """Starts `python -m jupyterhub` with its proxy; users, servers and tokens through its REST API."""

    def __init__(self, base: Path, *, proxy: Path, users: tuple[str, ...] = ("alice", "bob")) -> None:
        self.base = base
        self.proxy = proxy.resolve()
        self.users = users
        self.port, self.hub_port, self.proxy_api_port = free_port(), free_port(), free_port()
        self.admin_token = secrets.token_hex(16)
        self.log_path = base / "jupyterhub.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def server_url(self, user: str) -> str:
        return f"{self.url}user/{user}/"

    def mcp_url(self, user: str) -> str:
        return self.server_url(user) + "mcp"

    def workspace(self, user: str) -> Path:
        return self.base / "users" / user / "workspace"

    def config(self) -> str:
        base, bin_dir = self.base, Path(sys.executable).parent
        # No autosave within a test: what a stop saves is then only in the room when it comes (a
        # loaded machine took more than the default 1 s between two edits, and the autosave wrote first).
        single_user_args = ["--ServerApp.authorizer_class=jupyter_mcp.testing.hub.HubScopesAuthorizer",
                            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                            "--YDocExtension.document_save_delay=3600"]
        if os.geteuid() == 0:
            single_user_args.append("--allow-root")
        settings = {
            "JupyterHub.ip": "127.0.0.1", "JupyterHub.port": self.port,
            "JupyterHub.hub_ip": "127.0.0.1", "JupyterHub.hub_port": self.hub_port,
            "JupyterHub.public_url": self.url,
            "JupyterHub.db_url": f"sqlite:///{base / 'jupyterhub.sqlite'}",
            "JupyterHub.cookie_secret_file": str(base / "jupyterhub_cookie_secret"),
            "JupyterHub.pid_file": str(base / "jupyterhub.pid"),
            "JupyterHub.authenticator_class": "dummy", "Authenticator.allowed_users": set(self.users),
            "JupyterHub.spawner_class": "simple",
            "JupyterHub.tornado_settings": {"slow_spawn_timeout": 0},  # a start answers at once: servers start together
            "SimpleLocalProcessSpawner.home_dir_template": str(base / "users" / "{username}"),
            "Spawner.notebook_dir": str(base / "users" / "{username}" / "workspace"),
            "Spawner.cmd": [str(bin_dir / "jupyterhub-singleuser")],
            "Spawner.args": single_user_args,
            "Spawner.environment": {"PYTHONUNBUFFERED": "1", "JUPYTER_PLATFORM_DIRS": "1"},
            "Spawner.start_timeout": 180, "Spawner.http_timeout": 180,
            "ConfigurableHTTPProxy.command": [str(self.proxy)],
            "ConfigurableHTTPProxy.api_url": f"http://127.0.0.1:{self.proxy_api_port}",
            "ConfigurableHTTPProxy.auth_token": secrets.token_hex(16),
            "ConfigurableHTTPProxy.pid_file": str(base / "proxy.pid"),
            "JupyterHub.custom_scopes": _custom_scopes(),
            "JupyterHub.services": [{"name": "test-admin", "api_token": self.admin_token}],
            "JupyterHub.load_roles": [
                {"name": "test-admin", "scopes": ["admin:users", "admin:servers", "tokens"],
                 "services": ["test-admin"]},
                {"name": "user", "scopes": ["self", *(scope(action) + "!user" for action in ACTIONS)]},
            ],
        }
        return "".join(f"c.{key} = {value!r}\n" for key, value in settings.items())

    def start(self, timeout: float = 90) -> Hub:
        self.base.mkdir(parents=True, exist_ok=True)
        config = self.base / "jupyterhub_config.py"
        config.write_text(self.config())
        self.log_file = open(self.log_path, "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(config)], cwd=self.base, env=env,
                                     stdin=subprocess.DEVNULL, stdout=self.log_file, stderr=subprocess.STDOUT)
        self._until(timeout, "the hub did not answer through its proxy",
                    lambda: answers(self.url + "hub/api/"))
        for user in self.users:
            self.workspace(user).mkdir(parents=True, exist_ok=True)
            response = self.api("POST", f"users/{user}")
            if response.status_code not in (201, 409):
                raise RuntimeError(f"creating user {user}: {response.status_code} {response.text}")
        return self

    def _until(self, timeout: float, what: str, done: Callable[[], Any]) -> None:
        assert self.proc is not None, "start() the hub first"
        wait_until(self.proc, done, timeout=timeout, what=what, log=self.log)

    def api(self, method: str, path: str, *, token: str | None = None, **kwargs: Any) -> httpx.Response:
        """The hub's REST API (/hub/api/<path>), as the admin service unless ``token`` is given."""
        headers = {"Authorization": f"token {token or self.admin_token}"}
        return httpx.request(method, self.url + "hub/api/" + path, headers=headers, timeout=60, **kwargs)

    def token(self, user: str, scopes: list[str] | None = None) -> str:
        """A new API token of ``user``'s; ``scopes`` None: the default (all the user's permissions)."""
        body = {"note": "jupyter-mcp tests"} | ({"scopes": scopes} if scopes is not None else {})
        response = self.api("POST", f"users/{user}/tokens", json=body)
        if response.status_code != 201:
            raise RuntimeError(f"token for {user}: {response.status_code} {response.text}")
        return response.json()["token"]

    def server(self, user: str) -> dict | None:
        """The user's default server as the hub's API reports it (None: not running)."""
        return self.api("GET", f"users/{user}").json().get("servers", {}).get("")

    def start_servers(self, *users: str, timeout: float = 180) -> None:
        """Start the users' servers (all at once) and wait until each is ready."""
        for user in users:
            response = self.api("POST", f"users/{user}/server")
            if response.status_code not in (201, 202):
                raise RuntimeError(f"starting {user}'s server: {response.status_code} {response.text}")
        for user in users:
            self._until(timeout, f"{user}'s server was not ready", lambda: (self.server(user) or {}).get("ready"))

    def stop_server(self, user: str, timeout: float = 120) -> None:
        """DELETE the user's server and wait until the hub reports it gone."""
        response = self.api("DELETE", f"users/{user}/server")
        if response.status_code not in (202, 204):
            raise RuntimeError(f"stopping {user}'s server: {response.status_code} {response.text}")
        self._until(timeout, f"{user}'s server did not stop", lambda: self.server(user) is None)

    def log(self, skip: str | None = None) -> str:
        """The hub's log, the servers' included; without the lines containing ``skip`` (polls)."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "".join(line for line in text.splitlines(keepends=True) if not skip or skip not in line)

    def stop(self, timeout: float = 60) -> None:
        """Stop the hub; it stops the users' servers and its proxy first (cleanup_servers)."""
        if self.proc is not None and self.proc.poll() is None:
            end_process(self.proc, timeout=timeout)
            self.log_file.close()
        pid_file = self.base / "proxy.pid"  # removed by a hub that stopped its proxy
        try:
            pid = int(pid_file.read_text())
            if "configurable-http-proxy" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError):
            pass
