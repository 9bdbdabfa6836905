"""The kernels: a notebook's session kernel, the one loop that waits on a run, remote clients.

Layer rule (checked by tests/test_layers.py): imports nothing of ``transport``, ``tools``,
``notebooks`` or ``tasks``; of the top level, only the shared modules."""
