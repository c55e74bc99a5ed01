"""No credential or token ever appears in a log line, a DLQ record or an error message."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest

from calsync.core.config.logging import JsonFormatter, configure_logging, job_context
from calsync.core.model.redaction import MASK, redact, register_secrets
from calsync.core.store import accounts
from calsync.core.store.crypto import generate_key
from tests.support import Pipeline, wait_until

REFRESH = "1//0gdemo-refresh-token-abcdefghijklmnop"
CLIENT_SECRET = "GOCSPX-super-secret-client"
ACCESS = "ya29.a0AfB_access-token-value-xyz"


def test_registered_secrets_and_token_shapes_are_masked() -> None:
    register_secrets({"refresh_token": REFRESH, "nested": {"client_secret": CLIENT_SECRET}})
    text = f"refresh failed for {REFRESH} with {CLIENT_SECRET}; Authorization: Bearer abcdefghijkl {ACCESS}"
    masked = redact(text)
    for secret in (REFRESH, CLIENT_SECRET, ACCESS, "abcdefghijkl"):
        assert secret not in masked
    assert redact('{"password": "hunter22", "user": "ann"}') == '{"password": "***", "user": "ann"}'


def test_the_call_s_own_secrets_are_masked_longest_first_and_short_strings_left_alone() -> None:
    text = "user ann, password hunter22 or hunter22-extended, pin 123"
    assert redact(text, ["hunter22", "hunter22-extended", "123", "ann"]) == ("user ann, password *** or ***, pin 123")


@pytest.mark.parametrize(
    "token",
    [
        "1//0g-refresh.token_value",
        "ya29.a0-access_token.value",
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    ],
)
def test_token_shapes_are_masked_without_being_registered(token: str) -> None:
    assert redact(f"answer: {token} (done)") == f"answer: {MASK} (done)"


def test_prefixes_of_masked_pairs_are_kept() -> None:
    assert redact("Authorization: Bearer abcdefghijkl") == f"Authorization: Bearer {MASK}"
    assert redact("Authorization: Basic c3ZjOnN2Yy1wYXNz") == f"Authorization: Basic {MASK}"
    assert redact("client_secret=GOCSPX-x&scope=y") == f"client_secret={MASK}&scope=y"


def test_registration_takes_long_strings_and_long_lines_of_multi_line_secrets() -> None:
    key = "-----BEGIN KEY-----\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldY\n-----END KEY-----"
    register_secrets({"options": ["tiny", {"private_key": key}], "n": 5})
    assert redact("line QUJDREVGR0hJSktMTU5PUFFSU1RVVldY leaked") == f"line {MASK} leaked"
    assert redact("a tiny word") == "a tiny word"


def test_log_lines_are_json_with_job_fields() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("calsync.test.json")
    logger.addHandler(handler)
    try:
        with job_context({"job_id": "job_1", "trace_id": "req_1"}):
            logger.warning("token %s leaked", ACCESS, extra={"fields": {"outcome": "stale"}})
    finally:
        logger.removeHandler(handler)
    entry = json.loads(stream.getvalue())
    assert entry["job_id"] == "job_1" and entry["trace_id"] == "req_1" and entry["outcome"] == "stale"
    assert ACCESS not in entry["message"]


def test_a_failing_job_leaks_no_secret_into_logs_or_the_dlq(settings_factory: Any) -> None:
    stream = io.StringIO()
    configure_logging("DEBUG", stream=stream)
    pipeline = Pipeline(settings_factory(secret_key=generate_key()))
    try:
        credentials = {"refresh_token": REFRESH, "client_secret": CLIENT_SECRET}
        with pipeline.clients.db.write() as conn:
            account = accounts.add_account(
                conn, tenant_id="tenant-1", provider="memory", address="x@example.com",
                credentials=pipeline.clients.cipher.encrypt(credentials), options={},
            ).id  # fmt: skip
        # A provider that echoes the credentials and a token back in its error message.
        pipeline.provider.add_fault(error="auth", message=f"invalid_grant for {REFRESH} ({CLIENT_SECRET}) {ACCESS}")
        receipt = pipeline.submit([account])
        with pipeline.worker():
            pipeline.wait_target(receipt.entity_id, account, "failed")
            [record] = wait_until(pipeline.dead_letters, what="dead letter")
        last_error = pipeline.target(receipt.entity_id, account).last_error or ""
        stored = json.dumps(record.as_json(), default=str) + last_error
        logs = stream.getvalue()
        assert "invalid_grant" in stored and "job dead-lettered" in logs
        for secret in (REFRESH, CLIENT_SECRET, ACCESS):
            assert secret not in stored
            assert secret not in logs
    finally:
        pipeline.close()
        configure_logging("WARNING")
