"""The suite's fixtures: pytest-jupyter's, then jupyter-mcp's own plugin (jupyter_mcp/testing/plugin.py)."""

pytest_plugins = ["pytest_jupyter.jupyter_server", "jupyter_mcp.testing.plugin", "pytester"]
