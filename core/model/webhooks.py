"""The body of every webhook request: the published wire format (docs/schemas/webhook-notification.schema.json).

It lives with the other published models because core/model/schemas.py generates the JSON Schemas from
them and the model layer imports nothing above it; the rest of webhooks is one feature, core/webhooks/.
Payloads carry references and versions, never credentials or error texts. Receivers must order by
``data.version`` per (tenant, entity): delivery order is not guaranteed across retries (docs/PROTOCOL.md).
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

from calsync.core.model.vocabulary import WebhookEventType


class WebhookData(BaseModel):
    """What happened, by reference: the ids and versions of the job payload, never a secret."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant_id: str
    entity_id: str | None = Field(default=None, description="the event; None for account notifications")
    account_id: str | None = Field(default=None, description="the target account; None for event.cancelled")
    version: int | None = Field(default=None, description="the event version; order by it per (tenant, entity)")
    external_id: str | None = Field(default=None, description="the provider's id of the event, once it has one")
    status: str = Field(description="synced | deleted | failed | cancelled | needs_reauth | drifted")
    reason: str | None = Field(default=None, description="sync.dead_lettered: the reason class of the DLQ record")
    error_class: str | None = Field(default=None, description="sync.dead_lettered: the error class, never its text")
    drift_kind: str | None = Field(
        default=None,
        description="event.drifted: deleted_externally | modified_externally | missing | unknown_item (a marked item "
        "no target owns: entity_id is the event its marker names, if any)",
    )
    job_id: str | None = None
    trace_id: str | None = None


class WebhookNotification(BaseModel):
    """The body of every webhook request (the Standard Webhooks ``type`` / ``timestamp`` / ``data`` shape)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: WebhookEventType
    timestamp: dt.datetime = Field(description="when calsync recorded what happened (UTC)")
    data: WebhookData

    def body(self) -> bytes:
        """The exact bytes sent and signed."""
        return self.model_dump_json().encode()
