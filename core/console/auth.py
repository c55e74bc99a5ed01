"""Who is using the console: a signed-in operator (a session cookie, or a trusted proxy's header), and what they may do.

INTERFACE FIXED FOR THE PAGES (implementation lands with the operators' store, branch console-auth):
- ``SignedIn``: the operator of a signed-in session, any role; a request without one is sent to the sign-in page
  (a GET) or refused 401 (anything else).
- ``Acting``: a signed-in operator with the role ``operator`` whose request carries the session's CSRF token (form
  field ``csrf_token`` or header ``X-CSRF-Token``); a viewer is 403, a missing or wrong token 403.
Both set ``request.state.operator`` and ``request.state.csrf_token`` for the templates (templating.render).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from calsync.core.model.vocabulary import OperatorRole


@dataclass(frozen=True)
class Operator:
    """A signed-in person: their operator id, name (what the audit log records) and role."""

    id: str
    name: str
    role: OperatorRole

    @property
    def can_act(self) -> bool:
        """Whether this operator may change anything (the pages hide their buttons otherwise)."""
        return self.role == "operator"


async def signed_in(request: Request) -> Operator:
    """The signed-in operator of this request."""
    raise NotImplementedError("branch console-auth")


async def acting(request: Request, operator: Annotated[Operator, Depends(signed_in)]) -> Operator:
    """The signed-in operator, allowed to act, with this request's CSRF token checked."""
    raise NotImplementedError("branch console-auth")


SignedIn = Annotated[Operator, Depends(signed_in)]
Acting = Annotated[Operator, Depends(acting)]
