"""What an agent calls: the tools, their results, resources, prompts and the operations below them.

Layer rule (checked by tests/test_layers.py): may import ``notebooks``, ``kernels``, ``tasks``
and the shared top-level modules; never ``transport``."""
