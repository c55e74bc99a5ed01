"""The tenant's webhook endpoints: register (the secret is answered once), list, show, disable, enable,
rotate the secret, remove. Admin scope. The bodies (docs/PROTOCOL.md, "Webhooks"): registration in,
endpoints out, never a secret except the one answer that creates or rotates it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from calsync.core.api.auth import Admin, Services
from calsync.core.api.problems import AUTHENTICATED, problems
from calsync.core.model.vocabulary import (
    WEBHOOK_EVENT_TYPES,
    WebhookDisabledBy,
    WebhookEndpointStatus,
    WebhookEventType,
)
from calsync.core.webhooks import Endpoint

router = APIRouter(tags=["webhooks"])
EndpointId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]


class WebhookEndpointIn(BaseModel):
    """A receiver to register for the key's tenant."""

    model_config = ConfigDict(extra="forbid")

    url: Annotated[str, Field(min_length=1, max_length=2048, description="https (http only in development)")]
    events: Annotated[list[WebhookEventType], Field(min_length=1, max_length=len(WEBHOOK_EVENT_TYPES))]


class WebhookEndpointOut(BaseModel):
    """A registered endpoint (without its secrets)."""

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


def _out(endpoint: Endpoint) -> WebhookEndpointOut:
    return WebhookEndpointOut.model_validate(endpoint.as_json())


@router.post("/v1/webhooks", status_code=201, response_model=WebhookSecretOut, responses=problems(400, *AUTHENTICATED),
             summary="Register a webhook endpoint")  # fmt: skip
async def add_webhook(principal: Admin, deps: Services, body: Annotated[WebhookEndpointIn, Body()]) -> WebhookSecretOut:
    """Register a receiver for the key's tenant; the answer carries its signing secret, once."""
    secret, endpoint = deps.webhooks.add(principal.tenant_id, body.url, body.events)
    return WebhookSecretOut.model_validate({**endpoint.as_json(), "secret": secret})


@router.get("/v1/webhooks", response_model=WebhookEndpointList, responses=problems(*AUTHENTICATED),
            summary="List webhook endpoints")  # fmt: skip
def list_webhooks(principal: Admin, deps: Services) -> WebhookEndpointList:
    """The key's tenant's endpoints, oldest first (never their secrets)."""
    return WebhookEndpointList(items=[_out(e) for e in deps.webhooks.list(principal.tenant_id)])


@router.get("/v1/webhooks/{endpoint_id}", response_model=WebhookEndpointOut,
            responses=problems(404, *AUTHENTICATED), summary="Show one webhook endpoint")  # fmt: skip
def get_webhook(principal: Admin, deps: Services, endpoint_id: EndpointId) -> WebhookEndpointOut:
    """One endpoint of the key's tenant."""
    return _out(deps.webhooks.get(endpoint_id, principal.tenant_id))


@router.post("/v1/webhooks/{endpoint_id}/disable", response_model=WebhookEndpointOut,
             responses=problems(404, *AUTHENTICATED), summary="Disable a webhook endpoint")  # fmt: skip
def disable_webhook(principal: Admin, deps: Services, endpoint_id: EndpointId) -> WebhookEndpointOut:
    """Stop delivering; pending deliveries go to the DLQ, to be replayed after enabling."""
    why = "disabled over the API"
    return _out(deps.webhooks.disable(endpoint_id, principal.tenant_id, reason=why))


@router.post("/v1/webhooks/{endpoint_id}/enable", response_model=WebhookEndpointOut,
             responses=problems(404, *AUTHENTICATED), summary="Enable a webhook endpoint")  # fmt: skip
def enable_webhook(principal: Admin, deps: Services, endpoint_id: EndpointId) -> WebhookEndpointOut:
    """Deliver again (also after the breaker disabled it); the failure streak starts from zero."""
    return _out(deps.webhooks.enable(endpoint_id, principal.tenant_id))


@router.post("/v1/webhooks/{endpoint_id}/rotate-secret", response_model=WebhookSecretOut,
             responses=problems(404, *AUTHENTICATED), summary="Rotate a webhook endpoint's secret")  # fmt: skip
def rotate_webhook_secret(principal: Admin, deps: Services, endpoint_id: EndpointId) -> WebhookSecretOut:
    """A new secret, answered once; the previous one signs too during the grace period."""
    secret, endpoint = deps.webhooks.rotate_secret(endpoint_id, principal.tenant_id)
    return WebhookSecretOut.model_validate({**endpoint.as_json(), "secret": secret})


@router.delete("/v1/webhooks/{endpoint_id}", status_code=204, responses=problems(404, *AUTHENTICATED),
               summary="Remove a webhook endpoint")  # fmt: skip
def remove_webhook(principal: Admin, deps: Services, endpoint_id: EndpointId) -> Response:
    """Delete an endpoint of the key's tenant and its deliveries."""
    deps.webhooks.remove(endpoint_id, principal.tenant_id)
    return Response(status_code=204)
