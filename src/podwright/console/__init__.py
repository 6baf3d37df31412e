"""The web console: researchers submit and follow workloads, administrators see policies at work.

``podwright console`` serves it from this machine (:mod:`podwright.console.server`); its pages
(:mod:`podwright.console.app`) are built on the public API alone (an import-linter contract
keeps them to :mod:`podwright.api`), and one feed of the tasks serves every open page
(:mod:`podwright.console.hub`).
"""
