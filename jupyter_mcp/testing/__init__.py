"""Test parts for jupyter-mcp, shared by its tests and benchmarks (and usable by anyone who
builds on it): a real `jupyter lab` process, a real Redis, a stand-in for a JupyterLab tab
that joins a notebook's room as the UI does, notebooks on disk, tool calls that fail loudly.
The pytest fixtures are in ``jupyter_mcp.testing.plugin``."""

from .live import LiveServer, StatusPoller, eventually, free_port
from .notebooks import (ToolFailed, big_notebook, call, disk_sources, failed_run, new_notebook, read_notebook, refused,
                        saved_notebook, sources_of, write_notebook)
from .redis import RedisServer
from .ui import UIClient, ui_execute, ui_session

__all__ = ["LiveServer", "RedisServer", "StatusPoller", "ToolFailed", "UIClient", "big_notebook", "call", "disk_sources", "eventually", "failed_run", "free_port", "new_notebook", "read_notebook", "refused",
           "saved_notebook", "sources_of", "ui_execute", "ui_session", "write_notebook"]
