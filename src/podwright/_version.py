"""podwright's version: the one place it is written (``pyproject.toml`` reads it from here), so
that ``podwright --version`` needs no package metadata lookup at start-up."""

__version__ = "0.1.0"
