"""Webhooks, one feature (docs/PROTOCOL.md, "Webhooks"): signed notifications of what happened to a tenant's
receivers, from an outbox written in the transaction of what it reports.

Inside, layered (pyproject's contracts): ``settings`` and ``model`` (ids, URL and address rules, signatures)
at the bottom; ``store`` (the three tables) and ``transport`` (SSRF-safe HTTP) above them; on top
``outbox`` (recorded by the sync job and the DLQ recorder; DLQ replay and the reconciler's re-sends),
``deliverer`` (fan-out, sign, post, retry, DLQ, the breaker, metrics) and ``endpoints`` (registration). The
worker, the producer, the API, the CLI and the composition root import the names below from here, never a
module inside.

They load on first use (PEP 562): core/config/settings.py imports ``.settings``, which runs this file in
every process, and one that never touches webhooks (a ``calsync`` command, a service calling
``submit_change``) must not pay for httpx and Prometheus at start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from calsync.core.webhooks.deliverer import Deliverer as Deliverer
    from calsync.core.webhooks.deliverer import DeliveryPolicy as DeliveryPolicy
    from calsync.core.webhooks.deliverer import export_delivery_zeros as export_delivery_zeros
    from calsync.core.webhooks.endpoints import Endpoints as Endpoints
    from calsync.core.webhooks.outbox import WEBHOOK_JOBS as WEBHOOK_JOBS
    from calsync.core.webhooks.outbox import Outbox as Outbox
    from calsync.core.webhooks.outbox import reconcile_webhooks as reconcile_webhooks
    from calsync.core.webhooks.outbox import replay_webhook as replay_webhook
    from calsync.core.webhooks.store import Endpoint as Endpoint
    from calsync.core.webhooks.store import count_deliveries as count_deliveries
    from calsync.core.webhooks.store import count_disabled as count_disabled
    from calsync.core.webhooks.store import recent_deliveries as recent_deliveries
    from calsync.core.webhooks.transport import Transport as Transport

_HOMES = {  # module: the names it holds
    "deliverer": ("Deliverer", "DeliveryPolicy", "export_delivery_zeros"),
    "endpoints": ("Endpoints",),
    "outbox": ("Outbox", "WEBHOOK_JOBS", "reconcile_webhooks", "replay_webhook"),
    "store": ("Endpoint", "count_deliveries", "count_disabled", "recent_deliveries"),
    "transport": ("Transport",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}
__all__ = list(_HOME_OF)


def __getattr__(name: str) -> Any:
    if name not in _HOME_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME_OF[name]}"), name)
