"""The bodies of ``/v1/webhooks`` (docs/PROTOCOL.md, "Webhooks"): registration in, endpoints out, never a secret
except the one answer that creates it."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from calsync.core.model.vocabulary import (
    WEBHOOK_EVENT_TYPES,
    WebhookDisabledBy,
    WebhookEndpointStatus,
    WebhookEventType,
)


class WebhookEndpointIn(BaseModel):
    """A receiver to register for the key's tenant."""

    model_config = ConfigDict(extra="forbid")

    url: Annotated[str, Field(min_length=1, max_length=2048, description="https (http only in development)")]
    events: Annotated[list[WebhookEventType], Field(min_length=1, max_length=len(WEBHOOK_EVENT_TYPES))]


class WebhookEndpointOut(BaseModel):
    """A registered endpoint (without its secrets)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    url: str
    events: list[WebhookEventType]
    status: WebhookEndpointStatus
    disabled_by: WebhookDisabledBy | None
    disabled_reason: str | None
    consecutive_failures: int
    failing_since: str | None
    previous_secret_expires_at: str | None
    created_at: str


class WebhookSecretOut(WebhookEndpointOut):
    """An endpoint with its new signing secret: shown in this answer only."""

    secret: Annotated[str, Field(description="whsec_ + base64; verify with any Standard Webhooks library")]


class WebhookEndpointList(BaseModel):
    """The key's tenant's endpoints, oldest first."""

    items: list[WebhookEndpointOut]
