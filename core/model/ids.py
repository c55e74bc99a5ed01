"""Identifiers: what a tenant, entity or account id may look like, and how we mint new ones."""

from __future__ import annotations

import secrets
import time
import uuid
from typing import Annotated

from pydantic import StringConstraints, TypeAdapter, ValidationError

from calsync.core.model.errors import InvalidChange

# No ':' or whitespace: ids are joined with ':' into idempotency keys, lock and dedup keys.
Identifier = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$")]
IDENTIFIER_RULE = "an id of letters, digits and _ . @ - (at most 128, starting with a letter or digit)"
_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)
_QUOTED = 40  # characters of a refused value an error quotes (a 5,000-character tenant is not echoed back)


def quoted(value: object) -> str:
    """A refused value as an error message quotes it: its repr, a long string cut and its length given."""
    if isinstance(value, str) and len(value) > _QUOTED:
        return f"{value[:_QUOTED]!r}… ({len(value)} characters)"
    return repr(value)


def check_identifier(value: str, name: str) -> str:
    """``value`` when it is an :data:`Identifier`, else :class:`InvalidChange` naming ``name`` and the rule.

    The one check of a tenant or account id given outside a change document (``submit_change``'s ``tenant_id``,
    the CLI's ``--tenant`` and ``--id``), so every door refuses the same ids in the same words.
    """
    try:
        return _IDENTIFIER.validate_python(value)
    except ValidationError:
        problem = f"{name}: {quoted(value)} is not a valid identifier; it must be {IDENTIFIER_RULE}"
        raise InvalidChange(problem) from None


def new_id(prefix: str) -> str:
    """A time-ordered random id (``prefix_`` + 12 hex of milliseconds + 12 random hex), sortable by age."""
    return f"{prefix}_{int(time.time() * 1000):012x}{secrets.token_hex(6)}"


def new_trace_id() -> str:
    """A correlation id for a request that arrived without one."""
    return f"trace_{uuid.uuid4().hex}"
