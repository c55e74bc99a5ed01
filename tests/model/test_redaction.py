"""Redaction without services: registered secrets are masked whole, whatever else is registered."""

from __future__ import annotations

import uuid

from calsync.core.model.redaction import MASK, redact, register_secrets


def test_a_secret_containing_another_registered_secret_is_masked_whole() -> None:
    inner = f"inner-{uuid.uuid4().hex[:8]}"
    outer = f"outer-{uuid.uuid4().hex[:8]}-{inner}-tail"
    register_secrets({"password": inner, "refresh_token": outer})
    masked = redact(f"token {outer} refused; password {inner} too")
    assert masked == f"token {MASK} refused; password {MASK} too"
