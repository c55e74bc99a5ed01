"""``GET /v1/events/{entity_id}``: an event's business state and each target's sync state."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from calsync.core.api.auth import Reader, Services
from calsync.core.api.models import EventOut
from calsync.core.api.problems import AUTHENTICATED, existing, problems
from calsync.core.model.ids import Identifier
from calsync.core.store import events, targets

router = APIRouter(tags=["events"])


@router.get(
    "/v1/events/{entity_id}",
    response_model=EventOut,
    responses=problems(404, *AUTHENTICATED),
    summary="Read an event and its sync state",
)
def get_event(
    deps: Services,
    entity_id: Annotated[Identifier, Path(description="The entity id of the receipt.")],
    principal: Reader,
) -> EventOut:
    """The event of the key's tenant; another tenant's event is answered exactly like a missing one (404)."""
    with deps.db.read() as conn:
        event = existing(events.get_event(conn, principal.tenant_id, entity_id), f"event {entity_id}")
        rows = targets.shown_targets(conn, principal.tenant_id, entity_id)
    return EventOut.of(event, rows)
