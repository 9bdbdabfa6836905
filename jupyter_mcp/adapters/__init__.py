"""Every private surface of a dependency the package stands on, one module per dependency (or per
coherent surface of one), each function saying why it is needed. Nothing here imports jupyter-mcp;
everything else reaches a dependency's internals only through here (tests/test_layers.py checks it),
and tests/test_adapters.py fails, naming the dependency and the surface, when an upgrade moves one."""
