"""Redaction without services: registered secrets are masked whole, whatever else is registered; ordinary words
are never masked, whatever was registered."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_every_string_under_a_secret_field_is_masked_however_deeply_it_is_nested() -> None:
    deep, listed = f"deep-{uuid.uuid4().hex[:12]}", f"listed-{uuid.uuid4().hex[:12]}"
    register_secrets({"private_key": {"pem": {"body": deep}}, "client_secret": ["plain", {"value": listed}]})
    assert redact(f"key {deep}, secret {listed}") == f"key {MASK}, secret {MASK}"


def test_token_shaped_strings_are_masked_by_pattern_whatever_their_case() -> None:
    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
    shown = {
        "HTTP 401 BEARER abcdefgh12345678 refused": f"HTTP 401 BEARER {MASK} refused",
        "access ya29.a0AfH6SMBx-token here": f"access {MASK} here",
        "refresh 1//0gLxyz-abc.def kept": f"refresh {MASK} kept",
        f"jwt {jwt} seen": f"jwt {MASK} seen",
        'body {"Refresh_Token": "r-12345"}': f'body {{"Refresh_Token": "{MASK}"}}',
        "url ?PASSWORD=hunter22&x=1": f"url ?PASSWORD={MASK}&x=1",
        f"pem {key} end": f"pem {MASK} end",
        "Authorization: Basic dXNlcjpwYXNz": f"Authorization: Basic {MASK}",
    }
    assert {text: redact(text) for text in shown} == shown


# --- ordinary words are never secrets; secret values are always masked (Hypothesis) -------------------------

# Words error messages are made of. Some were real credentials' values ("revoked" as a test user's refresh
# token turned Google's "Token has been expired or revoked." into "... or ***."): registered, they must still
# never be masked.
WORDS = ("Token", "has", "been", "expired", "or", "revoked", "invalid", "grant", "the", "calendar", "event",
         "account", "refused", "access", "denied", "Unauthorized", "mailbox", "quota", "exceeded", "ERROR",
         "secret", "token", "credentials", "Exchange", "Google", "request", "failed", "retry", "later")  # fmt: skip
SEPARATORS = (" ", ". ", ", ", ": ", "; ", " (", ") ", "\n", " - ", "!", "? ", "'", '"')
SECRET_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+="

register_secrets({"refresh_token": "revoked", "password": "expired", "client_secret": "Token",
                  "access_token": "calendar", "secret": "Unauthorized"})  # fmt: skip

prose = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), max_size=30).map(
    lambda pairs: "".join(word + sep for word, sep in pairs)
)
# What a credential's secret value looks like: long and random, or shorter with a digit or a symbol in it.
secret_values = st.one_of(
    st.text(SECRET_ALPHABET, min_size=16, max_size=80),
    st.tuples(st.text(SECRET_ALPHABET, min_size=5, max_size=15), st.sampled_from("0123456789-_./+=")).map("".join),
)


@given(text=prose, given_words=st.lists(st.sampled_from(WORDS), max_size=3))
@settings(max_examples=300, deadline=None)
def test_masking_never_changes_text_that_contains_no_secret(text: str, given_words: list[str]) -> None:
    assert redact(text, given_words) == text


@given(before=prose, after=prose, secret=secret_values, registered=st.booleans())
@settings(max_examples=300, deadline=None)
def test_masking_always_removes_a_secret(before: str, after: str, secret: str, registered: bool) -> None:
    text = f"{before}{secret} {after}"
    if registered:
        register_secrets({"refresh_token": secret})
    masked = redact(text) if registered else redact(text, [secret])
    assert secret not in masked and masked.startswith(before) and masked.endswith(f" {after}")
