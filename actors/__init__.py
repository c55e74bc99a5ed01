"""The composition roots: the actors (``declare.py``), the worker process (``worker.py``) and the CLI (``cli/``).

This package is the only place that joins the core to the provider adapters (docs/ARCHITECTURE.md). It
imports nothing itself, so ``calsync`` CLI commands that need no worker code do not load it.
"""
