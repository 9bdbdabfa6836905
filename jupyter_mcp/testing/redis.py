"""A real redis-server on a free port, for the Redis task store (empty after a restart unless ``persist``)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from .live import free_port


class RedisServer:
    def __init__(self, base: Path, *, persist: bool = False) -> None:
        """``persist``: keep the data across a stop and start (an append-only file in ``base``),
        as a production Redis does across a restart."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (bash scripts/test installs it with apt-get)")
        self.binary = binary
        self.port = free_port()
        self.base = base
        self.proc: subprocess.Popen | None = None
        self.persist = persist

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen([self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "yes" if self.persist else "no",
                                      "--appendfsync", "always", "--dir", str(self.base)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
