"""The HTTP side of /mcp: Jupyter's handler, Tornado to ASGI, JSON or a stream per request.

Layer rule (checked by tests/test_layers.py): imports nothing of ``tools``, ``notebooks``,
``kernels`` or ``tasks``; of the top level, only the shared modules."""
