"""A real Jupyter Kernel Gateway on a free port, whose kernels a `jupyter lab` started with
``--GatewayClient.url`` uses instead of local ones (``args`` gives that option). It checks an
auth token, as a gateway reachable by more than one server should; ``args`` gives it too."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import httpx

from .live import answers, end_process, free_port, wait_until


class KernelGateway:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.base.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.log_path = base / "gateway.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def args(self) -> list[str]:
        """What a Jupyter server is started with to take its kernels from this gateway."""
        return [f"--GatewayClient.url={self.url}", f"--GatewayClient.auth_token={self.token}"]

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def kernel_ids(self) -> list[str]:
        return [k["id"] for k in httpx.get(f"{self.url}/api/kernels", headers=self.headers, timeout=10).json()]

    def start(self, timeout: float = 60) -> KernelGateway:
        env = {"JUPYTER_RUNTIME_DIR": str(self.base / "runtime"), "JUPYTER_DATA_DIR": str(self.base / "data"),
               "JUPYTER_CONFIG_DIR": str(self.base / "config"), "JUPYTER_PLATFORM_DIRS": "1",
               "PYTHONUNBUFFERED": "1"}
        self.log_file = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernel_gateway", "--KernelGatewayApp.ip=127.0.0.1",
             f"--KernelGatewayApp.port={self.port}", "--KernelGatewayApp.port_retries=0",
             f"--KernelGatewayApp.auth_token={self.token}",
             "--JupyterWebsocketPersonality.list_kernels=True"],
            env={**os.environ, **env}, stdin=subprocess.DEVNULL, stdout=self.log_file, stderr=subprocess.STDOUT,
            cwd=self.base)
        try:
            wait_until(self.proc, lambda: answers(f"{self.url}/api/kernelspecs", self.headers), timeout=timeout,
                       what="the kernel gateway did not come up", log=self.log)
        except RuntimeError:
            self.stop()
            raise
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 20) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        end_process(self.proc, timeout=timeout)
        self.log_file.close()
