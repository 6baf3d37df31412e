"""Adapters: one module per external system (files, Kubernetes, SQLite, OS calls).

Each adapter maps its library's exceptions to its own documented exception tree (``raise ... from
error``), so the layers above never catch a third-party exception.
"""
