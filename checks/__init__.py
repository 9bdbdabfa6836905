"""Declarative checks (charly's check-step format) and the runner that executes them."""
