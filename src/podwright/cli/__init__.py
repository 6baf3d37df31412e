"""Entry points: the ``podwright`` command line, the top layer that wires the others together."""
