"""Identifiers: what a tenant, entity or account id may look like, and how we mint new ones."""

from __future__ import annotations

import secrets
import time
import uuid
from typing import Annotated

from pydantic import StringConstraints

# No ':' or whitespace: ids are joined with ':' into idempotency keys, lock and dedup keys.
Identifier = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$")]


def new_id(prefix: str) -> str:
    """A time-ordered random id (``prefix_`` + 12 hex of milliseconds + 12 random hex), sortable by age."""
    return f"{prefix}_{int(time.time() * 1000):012x}{secrets.token_hex(6)}"


def new_trace_id() -> str:
    """A correlation id for a request that arrived without one."""
    return f"trace_{uuid.uuid4().hex}"
