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


def test_only_secret_fields_are_masked_identifiers_survive() -> None:
    secret = f"GOCSPX-{uuid.uuid4().hex}"
    client_id = f"{uuid.uuid4().hex[:12]}.apps.googleusercontent.com"
    token_uri = "https://oauth2.googleapis.com/token"
    credentials = {"type": "authorized_user", "client_id": client_id, "client_secret": secret, "token_uri": token_uri,
                   "username": "room-booker", "nested": {"svc_password": "p4ssw0rd!"}}  # fmt: skip
    register_secrets(credentials)
    message = redact(f"credentials {client_id} at {token_uri} for room-booker ({secret}, p4ssw0rd!) authorized_user")
    assert message == f"credentials {client_id} at {token_uri} for room-booker ({MASK}, {MASK}) authorized_user"
