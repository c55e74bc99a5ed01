"""The HTTP intake (``calsync serve``): a FastAPI application over the producer, the store and the DLQ operations.

The top layer of core: it may use producer, observability and everything below, never the worker or the
adapters. :func:`calsync.core.api.app.create_app` takes the parts it uses (:class:`ApiServices`); the
composition root (``actors/serve.py``) builds them from its clients.
"""
