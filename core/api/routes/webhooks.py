"""The tenant's webhook endpoints: register (the secret is answered once), list, show, disable, enable,
rotate the secret, remove. Admin scope."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Request, Response

from calsync.core.api.auth import Principal, require, services
from calsync.core.api.problems import FieldError, ProblemError, not_found
from calsync.core.api.routes.common import AUTHENTICATED, problems
from calsync.core.api.webhook_models import WebhookEndpointIn, WebhookEndpointList, WebhookEndpointOut, WebhookSecretOut
from calsync.core.model.errors import InvalidWebhookEndpoint, InvalidWebhookUrl, WebhookEndpointNotFound
from calsync.core.store.webhook_endpoints import Endpoint
from calsync.core.webhooks.registration import Registry

router = APIRouter(tags=["webhooks"])
Admin = Annotated[Principal, Depends(require("admin"))]
EndpointId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]


def _registry(request: Request) -> Registry:
    registry = services(request).webhooks
    if registry is None:
        raise ProblemError(404, "not-found", "Not Found", "webhooks are not served by this deployment")
    return registry


def _out(endpoint: Endpoint) -> WebhookEndpointOut:
    return WebhookEndpointOut.model_validate(endpoint.as_json())


def _found(registry: Registry, endpoint_id: str, principal: Principal) -> Endpoint:
    try:
        return registry.get(endpoint_id, principal.tenant_id)
    except WebhookEndpointNotFound:
        raise not_found(f"webhook endpoint {endpoint_id}") from None


@router.post("/v1/webhooks", status_code=201, response_model=WebhookSecretOut, responses=problems(400, *AUTHENTICATED),
             summary="Register a webhook endpoint")  # fmt: skip
async def add_webhook(
    request: Request, principal: Admin, body: Annotated[WebhookEndpointIn, Body()]
) -> WebhookSecretOut:
    """Register a receiver for the key's tenant; the answer carries its signing secret, once."""
    registry = _registry(request)
    try:
        secret, endpoint = registry.add(principal.tenant_id, body.url, body.events)
    except InvalidWebhookEndpoint as exc:
        field = "url" if isinstance(exc, InvalidWebhookUrl) else "events"  # named as the body's own fields are
        raise ProblemError(422, "validation", "Unprocessable Content", str(exc),
                           errors=[FieldError(field=field, message=str(exc))]) from None  # fmt: skip
    return WebhookSecretOut.model_validate({**endpoint.as_json(), "secret": secret})


@router.get("/v1/webhooks", response_model=WebhookEndpointList, responses=problems(*AUTHENTICATED),
            summary="List webhook endpoints")  # fmt: skip
def list_webhooks(request: Request, principal: Admin) -> WebhookEndpointList:
    """The key's tenant's endpoints, oldest first (never their secrets)."""
    return WebhookEndpointList(items=[_out(e) for e in _registry(request).list(principal.tenant_id)])


@router.get("/v1/webhooks/{endpoint_id}", response_model=WebhookEndpointOut,
            responses=problems(404, *AUTHENTICATED), summary="Show one webhook endpoint")  # fmt: skip
def get_webhook(request: Request, principal: Admin, endpoint_id: EndpointId) -> WebhookEndpointOut:
    """One endpoint of the key's tenant."""
    return _out(_found(_registry(request), endpoint_id, principal))


@router.post("/v1/webhooks/{endpoint_id}/disable", response_model=WebhookEndpointOut,
             responses=problems(404, *AUTHENTICATED), summary="Disable a webhook endpoint")  # fmt: skip
def disable_webhook(request: Request, principal: Admin, endpoint_id: EndpointId) -> WebhookEndpointOut:
    """Stop delivering; pending deliveries go to the DLQ, to be replayed after enabling."""
    registry = _registry(request)
    _found(registry, endpoint_id, principal)
    return _out(registry.disable(endpoint_id, principal.tenant_id, reason="disabled over the API"))


@router.post("/v1/webhooks/{endpoint_id}/enable", response_model=WebhookEndpointOut,
             responses=problems(404, *AUTHENTICATED), summary="Enable a webhook endpoint")  # fmt: skip
def enable_webhook(request: Request, principal: Admin, endpoint_id: EndpointId) -> WebhookEndpointOut:
    """Deliver again (also after the breaker disabled it); the failure streak starts from zero."""
    registry = _registry(request)
    _found(registry, endpoint_id, principal)
    return _out(registry.enable(endpoint_id, principal.tenant_id))


@router.post("/v1/webhooks/{endpoint_id}/rotate-secret", response_model=WebhookSecretOut,
             responses=problems(404, *AUTHENTICATED), summary="Rotate a webhook endpoint's secret")  # fmt: skip
def rotate_webhook_secret(request: Request, principal: Admin, endpoint_id: EndpointId) -> WebhookSecretOut:
    """A new secret, answered once; the previous one signs too during the grace period."""
    registry = _registry(request)
    _found(registry, endpoint_id, principal)
    secret, endpoint = registry.rotate_secret(endpoint_id, principal.tenant_id)
    return WebhookSecretOut.model_validate({**endpoint.as_json(), "secret": secret})


@router.delete("/v1/webhooks/{endpoint_id}", status_code=204, responses=problems(404, *AUTHENTICATED),
               summary="Remove a webhook endpoint")  # fmt: skip
def remove_webhook(request: Request, principal: Admin, endpoint_id: EndpointId) -> Response:
    """Delete an endpoint of the key's tenant and its deliveries."""
    registry = _registry(request)
    _found(registry, endpoint_id, principal)
    registry.remove(endpoint_id, principal.tenant_id)
    return Response(status_code=204)
