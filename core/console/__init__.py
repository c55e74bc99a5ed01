"""The operator console: ``calsync serve`` under ``/console/``, server-rendered pages for on-call engineers.

Operators are not tenants: an operator signs in with a key of their own (``calsync operators create``) or through a
trusted proxy, holds the role ``viewer`` (reads) or ``operator`` (also acts), and sees every tenant. Every read works
without JavaScript; every state-changing request carries the session's CSRF token and is written to the audit log.

The composition root mounts :func:`create_console` at ``/console`` beside the HTTP API (``calsync serve``).

The package exports nothing: core/config/settings.py imports ``.settings`` (the console's settings mixin), so this
file runs in every process and must import nothing else; the composition root imports ``app`` and ``services``.
"""
