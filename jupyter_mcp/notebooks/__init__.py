"""The live notebooks: rooms, in-place cell edits, moves, changes, presence, files and paths.

Layer rule (checked by tests/test_layers.py): imports nothing of ``transport``, ``tools``,
``kernels`` or ``tasks``; of the top level, only the shared modules."""
