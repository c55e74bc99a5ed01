"""The operator console: ``calsync serve`` under ``/console/``, server-rendered pages for on-call engineers.

Operators are not tenants: an operator signs in with a key of their own (``calsync operators create``) or through a
trusted proxy, holds the role ``viewer`` (reads) or ``operator`` (also acts), and sees every tenant. Every read works
without JavaScript; every state-changing request carries the session's CSRF token and is written to the audit log.

The composition root mounts :func:`create_console` at ``/console`` beside the HTTP API (``calsync serve``).

The names below load on first use (PEP 562): core/config/settings.py imports ``.settings`` (the console's settings
mixin), which runs this file in every process, before the API and the clients the console is built on exist.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from calsync.core.console.app import create_console as create_console
    from calsync.core.console.services import ConsoleServices as ConsoleServices
    from calsync.core.console.services import console_services_from_clients as console_services_from_clients

_HOME_OF = {"create_console": "app", "ConsoleServices": "services", "console_services_from_clients": "services"}
__all__ = list(_HOME_OF)


def __getattr__(name: str) -> Any:
    if name not in _HOME_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME_OF[name]}"), name)
