"""jupyter-mcp: a Jupyter Server extension serving MCP at /mcp on the live notebooks."""

from __future__ import annotations

from typing import Any

from ._version import __version__


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from .app import JupyterMCPApp

    return [{"module": "jupyter_mcp", "app": JupyterMCPApp}]

__all__ = ["__version__"]
